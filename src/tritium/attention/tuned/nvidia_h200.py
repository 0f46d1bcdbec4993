"""Paged-attention kernel knobs for NVIDIA H200 (132 SMs): generated, do not edit.

Fitted by ``python -m tritium.tune attention --with-sweep bench/results/tuning/attention-NVIDIA-H100.json --fit bench/results/tuning/attention-NVIDIA-H200.json``
(sha256 9683a04f18f657a3; 597 decode-family and 1362 prefill-family workloads,
swept 2026-12-06T22:09:15+00:00; distilled trees {'decode': {'leaves': 3378, 'gates': {'D128-KV16': (0.7, 0.0), 'D128-KV8': (0.5, 0.02), 'D256-KV16': (0.6, 0.0), 'D256-KV8': (0.5, 0.0), 'D64-KV16': (0.6, 0.0), 'D64-KV8': (0.5, 0.0)}, 'fallbacks': {'D128-KV8-short': '128-2-0', 'D256-KV8-long': '64-2-4', 'D64-KV8-long': '128-3-2'}}, 'prefill': {'leaves': 1251, 'gates': {'D128-KV16': (0.8, 0.0), 'D128-KV8': (0.5, 0.0), 'D256-KV16': (0.7, 0.0), 'D256-KV8': (0.5, 0.02), 'D64-KV16': (0.5, 0.0), 'D64-KV8': (0.5, 0.0)}, 'fallbacks': {'D128-KV16-short': '128-32-4-3', 'D256-KV16-long': '128-64-8-2', 'D256-KV8-long': '128-128-8-2', 'D64-KV16-short': '128-64-4-2', 'D64-KV8-short': '128-64-4-2'}}}
(leaves fitted; gates by head_dim and KV bits: (q, m), a pick needs the q-quantile of its
predicted log gain over the fallback >= m; fallbacks where not the hand rules, by head_dim,
KV bits and keys <= 2048); cross-validated geometric-mean
slowdown vs the best swept, the cost model's picks vs the hand rules: {'decode': {'tree': 1.0126, 'hand': 1.1582}, 'prefill': {'tree': 1.0075, 'hand': 1.4877}}).
The benchmark's 22 anchor workloads are always in the training set.
The cost model also trained on bench/results/tuning/attention-NVIDIA-H100.json (NVIDIA H100 80GB HBM3, 3736 workloads, sha256 47737904ca9ad86b).
Held-out validation (workloads the fit never saw):
    decode: 119 held out, 91% within 5% of the best swept, worst infx the best and infx the hand rules
    prefill: 272 held out, 94% within 5% of the best swept, worst 1.303x the best and 1.033x the hand rules
"""

# Configurations that ran out of resources in the sweep and every one that needs at least as much
# (unfit_keys), as tritium.attention.config.resource_key: (block_m, tile_n, num_warps, num_stages,
# padded head_dim, KV bits). The tree's answer is not taken for these; the hand rules run instead.
UNFIT = frozenset({
    (16, 128, 4, 3, 256, 16),
    (32, 128, 4, 3, 256, 16),
    (64, 128, 4, 2, 256, 16),
    (64, 128, 4, 3, 256, 16),
    (128, 64, 8, 3, 256, 16),
    (128, 128, 4, 2, 256, 16),
    (128, 128, 4, 3, 256, 16),
    (128, 128, 8, 2, 256, 16),
    (128, 128, 8, 3, 256, 8),
    (128, 128, 8, 3, 256, 16),
})


def decode(f):
    if f['max_seqlen_k'] <= 320:
        if f['head_dim'] <= 192:
            if f['programs'] <= 384:
                if f['programs'] <= 96:
                    if f['max_seqlen_q'] <= 1:
                        if f['programs'] <= 1:
                            if f['head_dim'] <= 96:
                                if f['group'] <= 6:
                                    return (128, 2, 0)
                                else:
                                    if f['block_size'] <= 40:
                                        if f['kv_bits'] <= 12:
                                            return (128, 2, 0)
                                        else:
                                            return (128, 2, 1)
                                    else:
                                        return (128, 2, 0)
                            else:
                                if f['group'] <= 6:
                                    if f['kv_bits'] <= 12:
                                        return (128, 2, 0)
                                    else:
                                        return (32, 2, 1)
                                else:
                                    if f['block_size'] <= 40:
                                        return (32, 2, 2)
                                    else:
                                        if f['kv_bits'] <= 12:
                                            return (128, 2, 0)
                                        else:
                                            return (32, 2, 1)
                        else:
                            if f['group'] <= 2:
                                if f['programs'] <= 48:
                                    if f['num_seqs'] <= 12:
                                        if f['programs'] <= 3:
                                            if f['num_seqs'] <= 1:
                                                if f['kv_bits'] <= 12:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['head_dim'] <= 96:
                                                        if f['block_size'] <= 40:
                                                            return (128, 2, 4)
                                                        else:
                                                            return (128, 2, 0)
                                                    else:
                                                        return (32, 2, 1)
                                            else:
                                                return (128, 2, 0)
                                        else:
                                            if f['num_tokens'] <= 6:
                                                if f['programs'] <= 12:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['num_seqs'] <= 3:
                                                        if f['head_dim'] <= 96:
                                                            return (128, 2, 0)
                                                        else:
                                                            if f['kv_bits'] <= 12:
                                                                return (128, 2, 0)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 2, 0)
                                                                else:
                                                                    return (128, 2, 8)
                                                    else:
                                                        return (128, 2, 0)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    if f['programs'] <= 12:
                                                        if f['block_size'] <= 40:
                                                            if f['head_dim'] <= 96:
                                                                return (128, 2, 2)
                                                            else:
                                                                return (128, 2, 0)
                                                        else:
                                                            return (128, 2, 0)
                                                    else:
                                                        return (128, 2, 0)
                                                else:
                                                    return (128, 2, 0)
                                    else:
                                        if f['head_dim'] <= 96:
                                            if f['block_size'] <= 40:
                                                return (128, 2, 0)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    if f['num_tokens'] <= 24:
                                                        return (128, 2, 1)
                                                    else:
                                                        return (128, 2, 0)
                                                else:
                                                    return (128, 2, 0)
                                        else:
                                            return (128, 2, 0)
                                else:
                                    if f['block_size'] <= 40:
                                        if f['num_tokens'] <= 20:
                                            if f['head_dim'] <= 96:
                                                if f['kv_bits'] <= 12:
                                                    return (128, 2, 0)
                                                else:
                                                    return (128, 2, 2)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    return (128, 2, 2)
                                                else:
                                                    return (128, 2, 0)
                                        else:
                                            if f['head_dim'] <= 96:
                                                return (128, 2, 0)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    if f['num_tokens'] <= 48:
                                                        return (128, 2, 0)
                                                    else:
                                                        return (128, 2, 2)
                                                else:
                                                    return (128, 2, 0)
                                    else:
                                        if f['head_dim'] <= 96:
                                            return (128, 2, 0)
                                        else:
                                            if f['kv_bits'] <= 12:
                                                return (128, 2, 0)
                                            else:
                                                return (64, 2, 0)
                            else:
                                if f['programs'] <= 24:
                                    if f['num_tokens'] <= 6:
                                        if f['num_seqs'] <= 3:
                                            if f['kv_bits'] <= 12:
                                                if f['block_size'] <= 40:
                                                    if f['group'] <= 6:
                                                        if f['head_dim'] <= 96:
                                                            if f['num_seqs'] <= 1:
                                                                return (128, 2, 0)
                                                            else:
                                                                if f['programs'] <= 3:
                                                                    return (128, 2, 0)
                                                                else:
                                                                    if f['programs'] <= 10:
                                                                        return (128, 2, 1)
                                                                    else:
                                                                        return (128, 2, 0)
                                                        else:
                                                            return (128, 2, 0)
                                                    else:
                                                        return (128, 2, 0)
                                                else:
                                                    if f['num_tokens'] <= 1:
                                                        if f['head_dim'] <= 96:
                                                            return (128, 2, 0)
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (128, 2, 0)
                                                            else:
                                                                if f['programs'] <= 5:
                                                                    return (32, 2, 8)
                                                                else:
                                                                    return (128, 2, 0)
                                                    else:
                                                        return (128, 2, 0)
                                            else:
                                                if f['num_tokens'] <= 1:
                                                    if f['programs'] <= 5:
                                                        if f['group'] <= 6:
                                                            if f['head_dim'] <= 96:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (32, 2, 1)
                                                        else:
                                                            return (128, 2, 0)
                                                    else:
                                                        return (128, 2, 0)
                                                else:
                                                    return (128, 2, 0)
                                        else:
                                            if f['num_kv_heads'] <= 1:
                                                if f['head_dim'] <= 96:
                                                    if f['group'] <= 6:
                                                        if f['block_size'] <= 40:
                                                            if f['kv_bits'] <= 12:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (128, 2, 2)
                                                        else:
                                                            return (128, 2, 0)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (128, 2, 0)
                                                        else:
                                                            if f['kv_bits'] <= 12:
                                                                return (128, 2, 2)
                                                            else:
                                                                return (128, 2, 0)
                                                else:
                                                    return (128, 2, 0)
                                            else:
                                                return (128, 2, 0)
                                    else:
                                        if f['kv_bits'] <= 12:
                                            if f['group'] <= 6:
                                                if f['programs'] <= 12:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        if f['head_dim'] <= 96:
                                                            if f['num_tokens'] <= 12:
                                                                return (128, 2, 4)
                                                            else:
                                                                return (128, 2, 0)
                                                        else:
                                                            return (128, 2, 0)
                                                    else:
                                                        if f['num_tokens'] <= 12:
                                                            return (128, 2, 0)
                                                        else:
                                                            if f['head_dim'] <= 96:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (128, 2, 4)
                                            else:
                                                return (128, 2, 0)
                                        else:
                                            if f['num_kv_heads'] <= 1:
                                                return (128, 2, 0)
                                            else:
                                                if f['group'] <= 6:
                                                    if f['head_dim'] <= 96:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (128, 2, 0)
                                                        else:
                                                            return (128, 2, 1)
                                                else:
                                                    return (128, 2, 0)
                                else:
                                    if f['head_dim'] <= 96:
                                        if f['num_kv_heads'] <= 1:
                                            if f['programs'] <= 48:
                                                if f['group'] <= 6:
                                                    if f['kv_bits'] <= 12:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (128, 2, 8)
                                                        else:
                                                            return (128, 2, 0)
                                                else:
                                                    return (128, 2, 0)
                                            else:
                                                if f['group'] <= 6:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        if f['kv_bits'] <= 12:
                                                            return (128, 2, 8)
                                                        else:
                                                            return (128, 2, 0)
                                                    else:
                                                        return (128, 2, 0)
                                        else:
                                            return (128, 2, 0)
                                    else:
                                        if f['kv_bits'] <= 12:
                                            return (128, 2, 0)
                                        else:
                                            if f['programs'] <= 48:
                                                if f['block_size'] <= 40:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['num_kv_heads'] <= 1:
                                                            return (128, 2, 0)
                                                        else:
                                                            if f['num_kv_heads'] <= 5:
                                                                return (64, 2, 0)
                                                            else:
                                                                return (128, 2, 0)
                                            else:
                                                if f['block_size'] <= 40:
                                                    if f['num_seqs'] <= 48:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (64, 2, 0)
                                                        else:
                                                            return (128, 2, 0)
                                                else:
                                                    return (64, 2, 0)
                    else:
                        if f['head_dim'] <= 96:
                            if f['programs'] <= 3:
                                if f['kv_bits'] <= 12:
                                    if f['num_tokens'] <= 6:
                                        if f['group'] <= 2:
                                            return (128, 2, 0)
                                        else:
                                            if f['num_seqs'] <= 1:
                                                if f['block_size'] <= 40:
                                                    if f['num_kv_heads'] <= 1:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['max_seqlen_q'] <= 3:
                                                            if f['group'] <= 6:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (128, 2, 2)
                                                        else:
                                                            return (128, 2, 0)
                                                else:
                                                    if f['num_tokens'] <= 3:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['group'] <= 6:
                                                            if f['programs'] <= 1:
                                                                return (128, 2, 2)
                                                            else:
                                                                return (128, 2, 0)
                                                        else:
                                                            return (128, 2, 0)
                                            else:
                                                return (128, 2, 0)
                                    else:
                                        return (128, 2, 0)
                                else:
                                    if f['max_seqlen_q'] <= 6:
                                        return (128, 2, 0)
                                    else:
                                        if f['group'] <= 6:
                                            return (128, 2, 0)
                                        else:
                                            if f['programs'] <= 1:
                                                if f['block_size'] <= 40:
                                                    return (128, 2, 0)
                                                else:
                                                    return (64, 2, 0)
                                            else:
                                                return (64, 2, 0)
                            else:
                                if f['num_tokens'] <= 12:
                                    if f['programs'] <= 24:
                                        if f['max_seqlen_q'] <= 6:
                                            return (128, 2, 0)
                                        else:
                                            if f['group'] <= 6:
                                                return (128, 2, 0)
                                            else:
                                                if f['block_size'] <= 40:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        return (128, 2, 0)
                                                    else:
                                                        return (64, 2, 0)
                                    else:
                                        if f['group'] <= 6:
                                            return (128, 2, 0)
                                        else:
                                            if f['block_size'] <= 40:
                                                if f['kv_bits'] <= 12:
                                                    return (128, 2, 1)
                                                else:
                                                    return (128, 2, 0)
                                            else:
                                                return (128, 2, 0)
                                else:
                                    if f['programs'] <= 12:
                                        if f['group'] <= 6:
                                            return (128, 2, 0)
                                        else:
                                            if f['block_size'] <= 40:
                                                return (128, 2, 0)
                                            else:
                                                if f['max_seqlen_q'] <= 6:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        return (128, 2, 0)
                                                    else:
                                                        return (64, 2, 0)
                                    else:
                                        return (128, 2, 0)
                        else:
                            if f['max_seqlen_q'] <= 3:
                                if f['programs'] <= 48:
                                    if f['programs'] <= 1:
                                        if f['kv_bits'] <= 12:
                                            return (128, 2, 0)
                                        else:
                                            if f['group'] <= 6:
                                                return (32, 2, 1)
                                            else:
                                                return (128, 2, 0)
                                    else:
                                        if f['programs'] <= 3:
                                            if f['num_seqs'] <= 1:
                                                if f['kv_bits'] <= 12:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['group'] <= 2:
                                                        return (32, 2, 1)
                                                    else:
                                                        if f['group'] <= 6:
                                                            if f['block_size'] <= 40:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (32, 2, 1)
                                                        else:
                                                            return (128, 2, 0)
                                            else:
                                                return (128, 2, 0)
                                        else:
                                            return (128, 2, 0)
                                else:
                                    if f['kv_bits'] <= 12:
                                        return (128, 2, 0)
                                    else:
                                        if f['block_size'] <= 40:
                                            return (128, 2, 0)
                                        else:
                                            return (64, 2, 0)
                            else:
                                if f['kv_bits'] <= 12:
                                    if f['group'] <= 2:
                                        if f['programs'] <= 12:
                                            if f['num_seqs'] <= 6:
                                                if f['programs'] <= 3:
                                                    if f['programs'] <= 1:
                                                        if f['max_seqlen_q'] <= 6:
                                                            return (32, 2, 1)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (32, 2, 1)
                                                    else:
                                                        return (32, 2, 1)
                                                else:
                                                    if f['num_tokens'] <= 12:
                                                        if f['num_seqs'] <= 1:
                                                            if f['num_tokens'] <= 6:
                                                                return (32, 2, 1)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 2, 0)
                                                                else:
                                                                    return (32, 2, 1)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (32, 2, 1)
                                                            else:
                                                                return (32, 2, 8)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            if f['max_seqlen_q'] <= 6:
                                                                return (32, 2, 1)
                                                            else:
                                                                return (128, 2, 0)
                                                        else:
                                                            return (32, 2, 1)
                                            else:
                                                if f['num_tokens'] <= 48:
                                                    if f['block_size'] <= 40:
                                                        return (32, 2, 1)
                                                    else:
                                                        return (32, 2, 4)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (128, 2, 0)
                                                    else:
                                                        return (32, 2, 1)
                                        else:
                                            if f['programs'] <= 48:
                                                return (128, 2, 0)
                                            else:
                                                if f['num_tokens'] <= 192:
                                                    if f['num_tokens'] <= 96:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (128, 2, 4)
                                                        else:
                                                            return (128, 2, 0)
                                                else:
                                                    return (128, 2, 0)
                                    else:
                                        if f['programs'] <= 48:
                                            if f['programs'] <= 1:
                                                if f['num_tokens'] <= 6:
                                                    if f['group'] <= 6:
                                                        if f['block_size'] <= 40:
                                                            return (128, 2, 0)
                                                        else:
                                                            return (32, 2, 1)
                                                    else:
                                                        return (128, 2, 0)
                                                else:
                                                    return (128, 2, 0)
                                            else:
                                                return (128, 2, 0)
                                        else:
                                            if f['num_tokens'] <= 192:
                                                if f['num_kv_heads'] <= 5:
                                                    if f['group'] <= 6:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (128, 2, 4)
                                                        else:
                                                            return (128, 2, 0)
                                                else:
                                                    return (128, 2, 0)
                                            else:
                                                return (128, 2, 0)
                                else:
                                    if f['block_size'] <= 40:
                                        if f['num_seqs'] <= 1:
                                            if f['num_tokens'] <= 6:
                                                if f['programs'] <= 1:
                                                    if f['group'] <= 6:
                                                        return (32, 2, 1)
                                                    else:
                                                        return (128, 2, 0)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['programs'] <= 5:
                                                            return (32, 2, 1)
                                                        else:
                                                            return (128, 2, 0)
                                                    else:
                                                        return (128, 2, 0)
                                            else:
                                                if f['group'] <= 6:
                                                    if f['group'] <= 2:
                                                        if f['num_kv_heads'] <= 1:
                                                            return (32, 2, 1)
                                                        else:
                                                            return (128, 2, 0)
                                                    else:
                                                        if f['programs'] <= 1:
                                                            return (128, 2, 0)
                                                        else:
                                                            if f['num_kv_heads'] <= 5:
                                                                return (128, 2, 8)
                                                            else:
                                                                return (128, 2, 0)
                                                else:
                                                    return (64, 2, 0)
                                        else:
                                            if f['group'] <= 6:
                                                return (128, 2, 0)
                                            else:
                                                if f['max_seqlen_q'] <= 6:
                                                    if f['num_tokens'] <= 48:
                                                        if f['programs'] <= 6:
                                                            if f['num_tokens'] <= 12:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (64, 2, 0)
                                                        else:
                                                            return (128, 2, 0)
                                                    else:
                                                        if f['programs'] <= 48:
                                                            if f['programs'] <= 24:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (64, 2, 0)
                                                        else:
                                                            return (128, 2, 0)
                                                else:
                                                    return (64, 2, 0)
                                    else:
                                        if f['num_seqs'] <= 1:
                                            if f['group'] <= 2:
                                                if f['num_kv_heads'] <= 5:
                                                    return (32, 2, 1)
                                                else:
                                                    return (128, 2, 0)
                                            else:
                                                if f['num_kv_heads'] <= 1:
                                                    if f['max_seqlen_q'] <= 6:
                                                        if f['group'] <= 6:
                                                            return (32, 2, 1)
                                                        else:
                                                            return (128, 2, 0)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (128, 2, 0)
                                                        else:
                                                            return (64, 2, 0)
                                                else:
                                                    if f['num_kv_heads'] <= 5:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['group'] <= 6:
                                                                return (64, 2, 0)
                                                            else:
                                                                return (128, 2, 0)
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (64, 2, 0)
                                                    else:
                                                        if f['num_tokens'] <= 6:
                                                            if f['group'] <= 6:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (64, 2, 0)
                                                        else:
                                                            return (64, 2, 0)
                                        else:
                                            if f['group'] <= 6:
                                                if f['programs'] <= 48:
                                                    if f['programs'] <= 12:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['programs'] <= 6:
                                                                if f['programs'] <= 3:
                                                                    if f['group'] <= 2:
                                                                        return (32, 2, 1)
                                                                    else:
                                                                        return (64, 2, 0)
                                                                else:
                                                                    return (64, 2, 0)
                                                            else:
                                                                if f['group'] <= 2:
                                                                    return (64, 2, 0)
                                                                else:
                                                                    return (128, 2, 0)
                                                        else:
                                                            return (64, 2, 0)
                                                    else:
                                                        if f['group'] <= 2:
                                                            if f['num_tokens'] <= 192:
                                                                if f['num_tokens'] <= 96:
                                                                    return (128, 2, 0)
                                                                else:
                                                                    if f['num_kv_heads'] <= 1:
                                                                        return (128, 2, 0)
                                                                    else:
                                                                        return (64, 2, 0)
                                                            else:
                                                                return (64, 2, 0)
                                                        else:
                                                            if f['max_seqlen_q'] <= 6:
                                                                if f['num_seqs'] <= 12:
                                                                    return (128, 2, 0)
                                                                else:
                                                                    if f['programs'] <= 24:
                                                                        return (128, 2, 0)
                                                                    else:
                                                                        return (64, 2, 0)
                                                            else:
                                                                return (64, 2, 0)
                                                else:
                                                    return (64, 2, 0)
                                            else:
                                                return (64, 2, 0)
                else:
                    if f['head_dim'] <= 96:
                        if f['kv_bits'] <= 12:
                            return (128, 2, 0)
                        else:
                            if f['programs'] <= 192:
                                if f['max_seqlen_q'] <= 1:
                                    if f['group'] <= 2:
                                        if f['block_size'] <= 40:
                                            if f['num_tokens'] <= 40:
                                                return (128, 2, 0)
                                            else:
                                                if f['num_seqs'] <= 96:
                                                    return (128, 2, 4)
                                                else:
                                                    return (128, 2, 0)
                                        else:
                                            return (128, 2, 0)
                                    else:
                                        return (128, 2, 0)
                                else:
                                    return (128, 2, 0)
                            else:
                                if f['num_tokens'] <= 384:
                                    if f['block_size'] <= 40:
                                        if f['num_kv_heads'] <= 5:
                                            if f['group'] <= 6:
                                                if f['group'] <= 2:
                                                    if f['max_seqlen_q'] <= 1:
                                                        return (128, 2, 0)
                                                    else:
                                                        return (64, 2, 0)
                                                else:
                                                    return (64, 2, 0)
                                            else:
                                                return (128, 2, 0)
                                        else:
                                            return (128, 2, 0)
                                    else:
                                        if f['num_seqs'] <= 80:
                                            if f['max_seqlen_q'] <= 1:
                                                if f['group'] <= 2:
                                                    return (128, 2, 0)
                                                else:
                                                    return (64, 2, 0)
                                            else:
                                                return (64, 2, 0)
                                        else:
                                            if f['group'] <= 6:
                                                if f['num_tokens'] <= 192:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['group'] <= 2:
                                                            return (128, 2, 0)
                                                        else:
                                                            return (64, 2, 0)
                                                    else:
                                                        if f['group'] <= 2:
                                                            return (64, 2, 0)
                                                        else:
                                                            return (128, 2, 0)
                                            else:
                                                return (64, 2, 0)
                                else:
                                    if f['group'] <= 6:
                                        return (64, 2, 0)
                                    else:
                                        if f['num_tokens'] <= 768:
                                            if f['block_size'] <= 40:
                                                return (128, 2, 0)
                                            else:
                                                return (64, 2, 0)
                                        else:
                                            return (64, 2, 0)
                    else:
                        if f['kv_bits'] <= 12:
                            if f['programs'] <= 192:
                                if f['max_seqlen_q'] <= 1:
                                    if f['num_seqs'] <= 40:
                                        return (64, 2, 0)
                                    else:
                                        if f['group'] <= 6:
                                            if f['group'] <= 2:
                                                if f['num_seqs'] <= 96:
                                                    return (64, 2, 0)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (128, 2, 0)
                                                    else:
                                                        return (64, 2, 0)
                                            else:
                                                return (128, 2, 0)
                                        else:
                                            return (64, 2, 0)
                                else:
                                    if f['group'] <= 2:
                                        if f['num_tokens'] <= 384:
                                            if f['num_tokens'] <= 48:
                                                if f['block_size'] <= 40:
                                                    return (128, 2, 0)
                                                else:
                                                    return (64, 2, 0)
                                            else:
                                                return (128, 2, 0)
                                        else:
                                            if f['num_kv_heads'] <= 1:
                                                return (128, 2, 0)
                                            else:
                                                if f['block_size'] <= 40:
                                                    return (128, 2, 0)
                                                else:
                                                    return (128, 2, 4)
                                    else:
                                        if f['max_seqlen_q'] <= 3:
                                            if f['block_size'] <= 40:
                                                if f['num_kv_heads'] <= 1:
                                                    if f['group'] <= 6:
                                                        return (64, 2, 0)
                                                    else:
                                                        return (128, 2, 0)
                                                else:
                                                    return (128, 2, 0)
                                            else:
                                                if f['num_tokens'] <= 80:
                                                    return (64, 2, 0)
                                                else:
                                                    if f['num_tokens'] <= 192:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (128, 2, 0)
                                                        else:
                                                            return (64, 2, 0)
                                        else:
                                            return (128, 2, 0)
                            else:
                                if f['num_kv_heads'] <= 1:
                                    if f['group'] <= 2:
                                        return (64, 2, 0)
                                    else:
                                        if f['block_size'] <= 40:
                                            if f['max_seqlen_q'] <= 3:
                                                if f['group'] <= 6:
                                                    if f['max_seqlen_q'] <= 1:
                                                        return (64, 2, 0)
                                                    else:
                                                        return (128, 2, 0)
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        return (128, 2, 0)
                                                    else:
                                                        return (64, 2, 0)
                                            else:
                                                return (64, 2, 0)
                                        else:
                                            if f['group'] <= 6:
                                                if f['num_tokens'] <= 768:
                                                    return (64, 2, 0)
                                                else:
                                                    return (128, 2, 0)
                                            else:
                                                if f['max_seqlen_q'] <= 6:
                                                    return (128, 2, 0)
                                                else:
                                                    return (64, 2, 0)
                                else:
                                    if f['block_size'] <= 40:
                                        if f['num_tokens'] <= 384:
                                            if f['num_tokens'] <= 96:
                                                return (64, 2, 0)
                                            else:
                                                if f['group'] <= 2:
                                                    return (64, 2, 0)
                                                else:
                                                    if f['max_seqlen_q'] <= 3:
                                                        if f['group'] <= 6:
                                                            if f['max_seqlen_q'] <= 1:
                                                                return (64, 2, 0)
                                                            else:
                                                                return (128, 2, 0)
                                                        else:
                                                            if f['num_tokens'] <= 192:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (64, 2, 0)
                                                    else:
                                                        if f['num_tokens'] <= 192:
                                                            return (128, 2, 0)
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (64, 2, 0)
                                        else:
                                            return (64, 2, 0)
                                    else:
                                        return (64, 2, 0)
                        else:
                            if f['num_tokens'] <= 48:
                                if f['block_size'] <= 40:
                                    if f['programs'] <= 192:
                                        if f['group'] <= 2:
                                            return (64, 2, 0)
                                        else:
                                            if f['num_tokens'] <= 24:
                                                if f['group'] <= 6:
                                                    return (64, 2, 0)
                                                else:
                                                    return (128, 2, 0)
                                            else:
                                                if f['group'] <= 6:
                                                    return (128, 2, 0)
                                                else:
                                                    return (64, 2, 0)
                                    else:
                                        return (64, 2, 0)
                                else:
                                    return (64, 2, 0)
                            else:
                                if f['num_tokens'] <= 96:
                                    if f['block_size'] <= 40:
                                        if f['num_kv_heads'] <= 5:
                                            if f['group'] <= 6:
                                                return (64, 2, 0)
                                            else:
                                                return (128, 2, 0)
                                        else:
                                            return (64, 2, 0)
                                    else:
                                        return (64, 2, 0)
                                else:
                                    return (64, 2, 0)
            else:
                if f['head_dim'] <= 96:
                    if f['max_seqlen_q'] <= 6:
                        if f['kv_bits'] <= 12:
                            return 'hand'
                        else:
                            if f['programs'] <= 768:
                                return 'hand'
                            else:
                                if f['programs'] <= 1536:
                                    if f['max_seqlen_q'] <= 1:
                                        if f['group'] <= 2:
                                            if f['block_size'] <= 40:
                                                return (128, 2, 0)
                                            else:
                                                return 'hand'
                                        else:
                                            return 'hand'
                                    else:
                                        if f['group'] <= 6:
                                            return 'hand'
                                        else:
                                            if f['block_size'] <= 40:
                                                return 'hand'
                                            else:
                                                if f['max_seqlen_q'] <= 3:
                                                    return 'hand'
                                                else:
                                                    return (128, 2, 0)
                                else:
                                    return 'hand'
                    else:
                        if f['kv_bits'] <= 12:
                            return 'hand'
                        else:
                            if f['programs'] <= 768:
                                if f['group'] <= 6:
                                    return 'hand'
                                else:
                                    if f['num_seqs'] <= 160:
                                        return 'hand'
                                    else:
                                        if f['block_size'] <= 40:
                                            return 'hand'
                                        else:
                                            return (32, 2, 0)
                            else:
                                if f['group'] <= 2:
                                    return 'hand'
                                else:
                                    if f['group'] <= 6:
                                        if f['num_tokens'] <= 1536:
                                            if f['block_size'] <= 40:
                                                return 'hand'
                                            else:
                                                return (128, 2, 0)
                                        else:
                                            return (128, 2, 0)
                                    else:
                                        if f['programs'] <= 1536:
                                            if f['block_size'] <= 40:
                                                return 'hand'
                                            else:
                                                return (128, 2, 0)
                                        else:
                                            return 'hand'
                else:
                    if f['kv_bits'] <= 12:
                        if f['num_tokens'] <= 192:
                            if f['programs'] <= 768:
                                if f['group'] <= 6:
                                    return (128, 2, 0)
                                else:
                                    if f['max_seqlen_q'] <= 1:
                                        if f['block_size'] <= 40:
                                            return 'hand'
                                        else:
                                            return (128, 2, 0)
                                    else:
                                        return (128, 2, 0)
                            else:
                                if f['block_size'] <= 40:
                                    if f['group'] <= 2:
                                        return (128, 2, 0)
                                    else:
                                        if f['group'] <= 6:
                                            return (32, 2, 0)
                                        else:
                                            return (128, 2, 0)
                                else:
                                    if f['group'] <= 2:
                                        return (32, 2, 0)
                                    else:
                                        if f['group'] <= 6:
                                            return (32, 2, 1)
                                        else:
                                            return (32, 2, 0)
                        else:
                            if f['programs'] <= 768:
                                return (128, 2, 0)
                            else:
                                if f['block_size'] <= 40:
                                    if f['group'] <= 2:
                                        if f['num_seqs'] <= 192:
                                            if f['num_tokens'] <= 384:
                                                return (128, 2, 0)
                                            else:
                                                if f['max_seqlen_q'] <= 6:
                                                    return (32, 2, 0)
                                                else:
                                                    return (128, 2, 0)
                                        else:
                                            return (128, 2, 0)
                                    else:
                                        return (128, 2, 0)
                                else:
                                    if f['num_tokens'] <= 1536:
                                        if f['num_tokens'] <= 768:
                                            return (32, 2, 0)
                                        else:
                                            if f['programs'] <= 1536:
                                                return (32, 2, 0)
                                            else:
                                                if f['group'] <= 2:
                                                    return (32, 2, 0)
                                                else:
                                                    return (128, 2, 0)
                                    else:
                                        return (128, 2, 0)
                    else:
                        if f['num_tokens'] <= 192:
                            if f['block_size'] <= 40:
                                if f['num_tokens'] <= 96:
                                    return (32, 2, 0)
                                else:
                                    if f['group'] <= 2:
                                        if f['max_seqlen_q'] <= 1:
                                            return 'hand'
                                        else:
                                            return (32, 2, 0)
                                    else:
                                        if f['max_seqlen_q'] <= 1:
                                            return (32, 2, 0)
                                        else:
                                            if f['group'] <= 6:
                                                return (32, 2, 0)
                                            else:
                                                return 'hand'
                            else:
                                return (32, 2, 0)
                        else:
                            if f['block_size'] <= 40:
                                if f['max_seqlen_q'] <= 3:
                                    if f['programs'] <= 1536:
                                        if f['group'] <= 6:
                                            if f['max_seqlen_q'] <= 1:
                                                return (32, 2, 0)
                                            else:
                                                if f['num_tokens'] <= 384:
                                                    if f['group'] <= 2:
                                                        return 'hand'
                                                    else:
                                                        return (32, 2, 0)
                                                else:
                                                    if f['group'] <= 2:
                                                        return (32, 2, 0)
                                                    else:
                                                        return 'hand'
                                        else:
                                            return 'hand'
                                    else:
                                        return 'hand'
                                else:
                                    return 'hand'
                            else:
                                if f['num_seqs'] <= 192:
                                    if f['group'] <= 6:
                                        if f['num_tokens'] <= 384:
                                            if f['programs'] <= 768:
                                                if f['group'] <= 2:
                                                    return (32, 2, 0)
                                                else:
                                                    return 'hand'
                                            else:
                                                if f['group'] <= 2:
                                                    return 'hand'
                                                else:
                                                    return (32, 2, 0)
                                        else:
                                            if f['num_tokens'] <= 768:
                                                return 'hand'
                                            else:
                                                if f['group'] <= 2:
                                                    return 'hand'
                                                else:
                                                    return (32, 2, 0)
                                    else:
                                        return 'hand'
                                else:
                                    if f['num_tokens'] <= 1536:
                                        if f['num_kv_heads'] <= 5:
                                            if f['max_seqlen_q'] <= 3:
                                                return (32, 2, 0)
                                            else:
                                                if f['group'] <= 2:
                                                    return (32, 2, 0)
                                                else:
                                                    return 'hand'
                                        else:
                                            if f['num_tokens'] <= 384:
                                                return 'hand'
                                            else:
                                                if f['group'] <= 2:
                                                    return 'hand'
                                                else:
                                                    if f['max_seqlen_q'] <= 3:
                                                        if f['group'] <= 6:
                                                            return 'hand'
                                                        else:
                                                            return (32, 2, 0)
                                                    else:
                                                        return (32, 2, 0)
                                    else:
                                        if f['num_kv_heads'] <= 5:
                                            return 'hand'
                                        else:
                                            if f['group'] <= 2:
                                                return 'hand'
                                            else:
                                                return (32, 2, 0)
        else:
            if f['programs'] <= 48:
                if f['programs'] <= 24:
                    if f['num_seqs'] <= 6:
                        if f['num_kv_heads'] <= 5:
                            if f['num_tokens'] <= 24:
                                return 'hand'
                            else:
                                if f['group'] <= 6:
                                    return 'hand'
                                else:
                                    if f['programs'] <= 6:
                                        return 'hand'
                                    else:
                                        if f['block_size'] <= 40:
                                            return 'hand'
                                        else:
                                            if f['kv_bits'] <= 12:
                                                return 'hand'
                                            else:
                                                return (32, 2, 0)
                        else:
                            if f['group'] <= 6:
                                if f['max_seqlen_q'] <= 1:
                                    if f['block_size'] <= 40:
                                        if f['num_tokens'] <= 1:
                                            return 'hand'
                                        else:
                                            if f['group'] <= 2:
                                                return 'hand'
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    return 'hand'
                                                else:
                                                    return (128, 2, 0)
                                    else:
                                        return 'hand'
                                else:
                                    return 'hand'
                            else:
                                if f['max_seqlen_q'] <= 6:
                                    if f['max_seqlen_q'] <= 1:
                                        if f['kv_bits'] <= 12:
                                            return 'hand'
                                        else:
                                            if f['block_size'] <= 40:
                                                if f['num_tokens'] <= 1:
                                                    return 'hand'
                                                else:
                                                    return (64, 2, 0)
                                            else:
                                                return 'hand'
                                    else:
                                        return 'hand'
                                else:
                                    if f['kv_bits'] <= 12:
                                        return 'hand'
                                    else:
                                        if f['programs'] <= 12:
                                            return (32, 2, 0)
                                        else:
                                            if f['block_size'] <= 40:
                                                return (64, 2, 0)
                                            else:
                                                return 'hand'
                    else:
                        if f['group'] <= 2:
                            return 'hand'
                        else:
                            if f['programs'] <= 12:
                                if f['block_size'] <= 40:
                                    return 'hand'
                                else:
                                    if f['max_seqlen_q'] <= 6:
                                        if f['max_seqlen_q'] <= 1:
                                            if f['group'] <= 6:
                                                return 'hand'
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    return (32, 2, 8)
                                                else:
                                                    return 'hand'
                                        else:
                                            if f['num_tokens'] <= 24:
                                                return 'hand'
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    return 'hand'
                                                else:
                                                    if f['group'] <= 6:
                                                        return (32, 2, 8)
                                                    else:
                                                        return 'hand'
                                    else:
                                        return 'hand'
                            else:
                                if f['kv_bits'] <= 12:
                                    return 'hand'
                                else:
                                    if f['block_size'] <= 40:
                                        if f['group'] <= 6:
                                            if f['max_seqlen_q'] <= 1:
                                                return (128, 2, 0)
                                            else:
                                                if f['max_seqlen_q'] <= 3:
                                                    return (64, 2, 0)
                                                else:
                                                    if f['max_seqlen_q'] <= 6:
                                                        return 'hand'
                                                    else:
                                                        return (64, 2, 0)
                                        else:
                                            return (64, 2, 0)
                                    else:
                                        if f['group'] <= 6:
                                            return 'hand'
                                        else:
                                            if f['max_seqlen_q'] <= 1:
                                                return (64, 2, 0)
                                            else:
                                                if f['max_seqlen_q'] <= 6:
                                                    return 'hand'
                                                else:
                                                    return (64, 2, 0)
                else:
                    if f['kv_bits'] <= 12:
                        if f['group'] <= 2:
                            if f['max_seqlen_q'] <= 1:
                                if f['block_size'] <= 40:
                                    if f['num_kv_heads'] <= 1:
                                        return 'hand'
                                    else:
                                        if f['num_seqs'] <= 10:
                                            return 'hand'
                                        else:
                                            return (32, 2, 4)
                                else:
                                    return 'hand'
                            else:
                                return 'hand'
                        else:
                            if f['group'] <= 6:
                                return 'hand'
                            else:
                                if f['max_seqlen_q'] <= 6:
                                    if f['block_size'] <= 40:
                                        if f['num_tokens'] <= 24:
                                            return (64, 2, 0)
                                        else:
                                            if f['num_kv_heads'] <= 1:
                                                return (64, 2, 0)
                                            else:
                                                return 'hand'
                                    else:
                                        if f['max_seqlen_q'] <= 1:
                                            return 'hand'
                                        else:
                                            if f['num_tokens'] <= 12:
                                                return 'hand'
                                            else:
                                                if f['num_seqs'] <= 10:
                                                    return (64, 2, 0)
                                                else:
                                                    if f['num_seqs'] <= 24:
                                                        return 'hand'
                                                    else:
                                                        if f['num_tokens'] <= 96:
                                                            return (64, 2, 0)
                                                        else:
                                                            return 'hand'
                                else:
                                    if f['block_size'] <= 40:
                                        return (128, 2, 0)
                                    else:
                                        if f['num_seqs'] <= 10:
                                            return (128, 2, 0)
                                        else:
                                            if f['num_seqs'] <= 24:
                                                return 'hand'
                                            else:
                                                return (128, 2, 0)
                    else:
                        if f['group'] <= 2:
                            if f['block_size'] <= 40:
                                if f['num_kv_heads'] <= 5:
                                    if f['num_tokens'] <= 192:
                                        return 'hand'
                                    else:
                                        return (64, 2, 0)
                                else:
                                    if f['num_tokens'] <= 12:
                                        if f['max_seqlen_q'] <= 1:
                                            return (64, 2, 0)
                                        else:
                                            return 'hand'
                                    else:
                                        return (64, 2, 0)
                            else:
                                return 'hand'
                        else:
                            if f['num_tokens'] <= 6:
                                if f['block_size'] <= 40:
                                    if f['group'] <= 6:
                                        return (128, 2, 4)
                                    else:
                                        return (128, 2, 0)
                                else:
                                    return (64, 2, 0)
                            else:
                                if f['max_seqlen_q'] <= 1:
                                    if f['block_size'] <= 40:
                                        return (128, 2, 0)
                                    else:
                                        return (64, 2, 0)
                                else:
                                    return (64, 2, 0)
            else:
                if f['programs'] <= 384:
                    if f['programs'] <= 96:
                        if f['kv_bits'] <= 12:
                            if f['group'] <= 2:
                                if f['max_seqlen_q'] <= 1:
                                    return 'hand'
                                else:
                                    return (64, 2, 0)
                            else:
                                return (64, 2, 0)
                        else:
                            if f['block_size'] <= 40:
                                if f['max_seqlen_q'] <= 1:
                                    if f['group'] <= 2:
                                        if f['num_seqs'] <= 48:
                                            return (64, 2, 0)
                                        else:
                                            return 'hand'
                                    else:
                                        return (128, 2, 0)
                                else:
                                    if f['num_kv_heads'] <= 5:
                                        if f['max_seqlen_q'] <= 3:
                                            if f['group'] <= 2:
                                                return 'hand'
                                            else:
                                                if f['group'] <= 6:
                                                    return (64, 3, 0)
                                                else:
                                                    return (64, 2, 0)
                                        else:
                                            if f['max_seqlen_q'] <= 6:
                                                if f['group'] <= 2:
                                                    return (64, 2, 0)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (64, 3, 0)
                                                    else:
                                                        return (64, 2, 0)
                                            else:
                                                return (64, 2, 0)
                                    else:
                                        return (64, 2, 0)
                            else:
                                if f['max_seqlen_q'] <= 3:
                                    if f['group'] <= 2:
                                        return 'hand'
                                    else:
                                        return (64, 3, 0)
                                else:
                                    if f['group'] <= 2:
                                        return (64, 3, 0)
                                    else:
                                        if f['max_seqlen_q'] <= 6:
                                            if f['group'] <= 6:
                                                return (64, 3, 0)
                                            else:
                                                return (64, 2, 0)
                                        else:
                                            return (64, 2, 0)
                    else:
                        if f['programs'] <= 192:
                            if f['kv_bits'] <= 12:
                                if f['num_tokens'] <= 24:
                                    if f['group'] <= 2:
                                        return (32, 2, 0)
                                    else:
                                        return (64, 2, 0)
                                else:
                                    if f['max_seqlen_q'] <= 1:
                                        if f['group'] <= 2:
                                            return (32, 2, 0)
                                        else:
                                            if f['group'] <= 6:
                                                return (64, 2, 0)
                                            else:
                                                if f['block_size'] <= 40:
                                                    return (32, 2, 0)
                                                else:
                                                    return (64, 2, 0)
                                    else:
                                        if f['num_tokens'] <= 48:
                                            if f['group'] <= 6:
                                                return (32, 2, 0)
                                            else:
                                                if f['block_size'] <= 40:
                                                    return (32, 2, 0)
                                                else:
                                                    return (64, 2, 0)
                                        else:
                                            return (32, 2, 0)
                            else:
                                if f['block_size'] <= 40:
                                    if f['max_seqlen_q'] <= 1:
                                        if f['group'] <= 2:
                                            return (64, 2, 0)
                                        else:
                                            if f['group'] <= 6:
                                                return (128, 2, 0)
                                            else:
                                                return (64, 2, 0)
                                    else:
                                        if f['max_seqlen_q'] <= 6:
                                            return (64, 2, 0)
                                        else:
                                            if f['group'] <= 6:
                                                return (64, 2, 0)
                                            else:
                                                return (32, 2, 0)
                                else:
                                    return (64, 2, 0)
                        else:
                            if f['block_size'] <= 40:
                                if f['kv_bits'] <= 12:
                                    return (64, 2, 0)
                                else:
                                    if f['max_seqlen_q'] <= 1:
                                        return (64, 2, 0)
                                    else:
                                        if f['num_kv_heads'] <= 1:
                                            if f['num_tokens'] <= 1536:
                                                return (64, 2, 0)
                                            else:
                                                if f['group'] <= 6:
                                                    return (64, 2, 0)
                                                else:
                                                    return 'hand'
                                        else:
                                            if f['group'] <= 2:
                                                if f['max_seqlen_q'] <= 3:
                                                    return 'hand'
                                                else:
                                                    if f['num_kv_heads'] <= 5:
                                                        if f['num_tokens'] <= 768:
                                                            return 'hand'
                                                        else:
                                                            return (64, 2, 0)
                                                    else:
                                                        return (64, 2, 0)
                                            else:
                                                if f['max_seqlen_q'] <= 6:
                                                    return (64, 2, 0)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (64, 2, 0)
                                                    else:
                                                        return 'hand'
                            else:
                                if f['num_tokens'] <= 384:
                                    if f['group'] <= 2:
                                        if f['kv_bits'] <= 12:
                                            return (64, 2, 0)
                                        else:
                                            if f['max_seqlen_q'] <= 1:
                                                return (64, 2, 0)
                                            else:
                                                if f['max_seqlen_q'] <= 3:
                                                    return 'hand'
                                                else:
                                                    return (64, 2, 0)
                                    else:
                                        if f['num_tokens'] <= 96:
                                            return (64, 2, 0)
                                        else:
                                            if f['max_seqlen_q'] <= 6:
                                                if f['kv_bits'] <= 12:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['num_kv_heads'] <= 1:
                                                            return (64, 2, 0)
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (64, 2, 1)
                                                            else:
                                                                return (64, 2, 0)
                                                    else:
                                                        return (64, 2, 0)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (64, 2, 0)
                                                    else:
                                                        if f['num_seqs'] <= 80:
                                                            return (64, 2, 1)
                                                        else:
                                                            if f['num_kv_heads'] <= 1:
                                                                return (64, 2, 1)
                                                            else:
                                                                return (64, 2, 0)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    return (64, 2, 0)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (64, 2, 0)
                                                    else:
                                                        return 'hand'
                                else:
                                    return (64, 2, 0)
                else:
                    if f['kv_bits'] <= 12:
                        if f['max_seqlen_q'] <= 1:
                            if f['block_size'] <= 40:
                                return (64, 2, 0)
                            else:
                                if f['group'] <= 2:
                                    return (64, 2, 0)
                                else:
                                    if f['num_seqs'] <= 96:
                                        return (64, 2, 0)
                                    else:
                                        if f['programs'] <= 1536:
                                            if f['num_tokens'] <= 192:
                                                if f['group'] <= 6:
                                                    return (64, 2, 2)
                                                else:
                                                    return (64, 2, 0)
                                            else:
                                                if f['group'] <= 6:
                                                    return (64, 2, 0)
                                                else:
                                                    return (64, 2, 2)
                                        else:
                                            return (64, 2, 0)
                        else:
                            if f['group'] <= 6:
                                return (64, 2, 0)
                            else:
                                if f['block_size'] <= 40:
                                    if f['num_tokens'] <= 768:
                                        if f['max_seqlen_q'] <= 6:
                                            return (64, 2, 0)
                                        else:
                                            return 'hand'
                                    else:
                                        if f['num_seqs'] <= 192:
                                            return (64, 2, 0)
                                        else:
                                            return 'hand'
                                else:
                                    return (64, 2, 0)
                    else:
                        if f['programs'] <= 1536:
                            if f['block_size'] <= 40:
                                if f['programs'] <= 768:
                                    if f['group'] <= 2:
                                        return 'hand'
                                    else:
                                        if f['num_seqs'] <= 160:
                                            if f['max_seqlen_q'] <= 3:
                                                return 'hand'
                                            else:
                                                if f['num_tokens'] <= 384:
                                                    if f['group'] <= 6:
                                                        return (64, 2, 0)
                                                    else:
                                                        return 'hand'
                                                else:
                                                    return 'hand'
                                        else:
                                            if f['max_seqlen_q'] <= 3:
                                                return (64, 2, 0)
                                            else:
                                                if f['num_tokens'] <= 1536:
                                                    if f['group'] <= 6:
                                                        return (64, 2, 0)
                                                    else:
                                                        return 'hand'
                                                else:
                                                    return 'hand'
                                else:
                                    if f['group'] <= 2:
                                        if f['num_tokens'] <= 384:
                                            return 'hand'
                                        else:
                                            return (64, 2, 0)
                                    else:
                                        if f['num_tokens'] <= 768:
                                            return (64, 2, 0)
                                        else:
                                            if f['group'] <= 6:
                                                return (64, 2, 0)
                                            else:
                                                return 'hand'
                            else:
                                if f['programs'] <= 768:
                                    return 'hand'
                                else:
                                    if f['group'] <= 2:
                                        return 'hand'
                                    else:
                                        if f['max_seqlen_q'] <= 1:
                                            return 'hand'
                                        else:
                                            if f['num_tokens'] <= 768:
                                                if f['num_tokens'] <= 384:
                                                    if f['group'] <= 6:
                                                        return 'hand'
                                                    else:
                                                        return (64, 2, 0)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (64, 2, 0)
                                                    else:
                                                        return 'hand'
                                            else:
                                                return 'hand'
                        else:
                            if f['group'] <= 6:
                                if f['max_seqlen_q'] <= 1:
                                    if f['group'] <= 2:
                                        return 'hand'
                                    else:
                                        if f['block_size'] <= 40:
                                            return (64, 2, 4)
                                        else:
                                            return (64, 2, 0)
                                else:
                                    if f['num_tokens'] <= 768:
                                        if f['block_size'] <= 40:
                                            return (64, 2, 0)
                                        else:
                                            if f['group'] <= 2:
                                                return 'hand'
                                            else:
                                                return (64, 2, 0)
                                    else:
                                        return (64, 2, 0)
                            else:
                                return (64, 2, 0)
    else:
        if f['programs'] <= 192:
            if f['head_dim'] <= 192:
                if f['max_seqlen_k'] <= 6144:
                    if f['programs'] <= 3:
                        if f['num_seqs'] <= 1:
                            if f['max_seqlen_q'] <= 1:
                                if f['head_dim'] <= 96:
                                    if f['group'] <= 2:
                                        if f['block_size'] <= 40:
                                            if f['kv_bits'] <= 12:
                                                if f['programs'] <= 1:
                                                    return (32, 2, 1)
                                                else:
                                                    if f['max_seqlen_k'] <= 1280:
                                                        return (32, 2, 1)
                                                    else:
                                                        return (32, 2, 4)
                                            else:
                                                return (32, 2, 1)
                                        else:
                                            return (32, 2, 1)
                                    else:
                                        return (32, 2, 1)
                                else:
                                    return (32, 2, 1)
                            else:
                                if f['max_seqlen_q'] <= 6:
                                    return (32, 2, 1)
                                else:
                                    if f['group'] <= 6:
                                        return (32, 2, 1)
                                    else:
                                        if f['head_dim'] <= 96:
                                            if f['kv_bits'] <= 12:
                                                if f['max_seqlen_k'] <= 1280:
                                                    return (32, 2, 1)
                                                else:
                                                    if f['num_kv_heads'] <= 1:
                                                        return (32, 2, 1)
                                                    else:
                                                        return (128, 2, 1)
                                            else:
                                                return (32, 2, 1)
                                        else:
                                            return (32, 2, 1)
                        else:
                            if f['max_seqlen_k'] <= 1280:
                                if f['block_size'] <= 40:
                                    if f['num_tokens'] <= 6:
                                        if f['group'] <= 2:
                                            return (32, 2, 1)
                                        else:
                                            if f['group'] <= 6:
                                                if f['num_tokens'] <= 3:
                                                    if f['kv_bits'] <= 12:
                                                        if f['head_dim'] <= 96:
                                                            return (32, 2, 8)
                                                        else:
                                                            return (32, 2, 1)
                                                    else:
                                                        return (32, 2, 1)
                                                else:
                                                    if f['head_dim'] <= 96:
                                                        return (32, 2, 1)
                                                    else:
                                                        if f['kv_bits'] <= 12:
                                                            return (32, 2, 1)
                                                        else:
                                                            return (32, 2, 8)
                                            else:
                                                if f['head_dim'] <= 96:
                                                    return (32, 2, 1)
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        return (32, 2, 1)
                                                    else:
                                                        if f['num_tokens'] <= 3:
                                                            return (32, 2, 1)
                                                        else:
                                                            return 'hand'
                                    else:
                                        if f['num_tokens'] <= 12:
                                            return (32, 2, 1)
                                        else:
                                            if f['kv_bits'] <= 12:
                                                return (32, 2, 1)
                                            else:
                                                if f['group'] <= 2:
                                                    return (32, 2, 1)
                                                else:
                                                    if f['head_dim'] <= 96:
                                                        if f['group'] <= 6:
                                                            return 'hand'
                                                        else:
                                                            return (32, 2, 1)
                                                    else:
                                                        return 'hand'
                                else:
                                    if f['num_tokens'] <= 12:
                                        return (32, 2, 1)
                                    else:
                                        if f['kv_bits'] <= 12:
                                            return (32, 2, 1)
                                        else:
                                            if f['group'] <= 2:
                                                return (32, 2, 1)
                                            else:
                                                if f['head_dim'] <= 96:
                                                    if f['group'] <= 6:
                                                        return 'hand'
                                                    else:
                                                        return (32, 2, 1)
                                                else:
                                                    return 'hand'
                            else:
                                if f['kv_bits'] <= 12:
                                    if f['max_seqlen_q'] <= 6:
                                        if f['max_seqlen_q'] <= 1:
                                            if f['group'] <= 2:
                                                if f['block_size'] <= 40:
                                                    return (32, 2, 1)
                                                else:
                                                    if f['head_dim'] <= 96:
                                                        return (32, 2, 4)
                                                    else:
                                                        return (32, 2, 1)
                                            else:
                                                return (32, 2, 1)
                                        else:
                                            return (32, 2, 1)
                                    else:
                                        if f['group'] <= 6:
                                            return (32, 2, 1)
                                        else:
                                            if f['block_size'] <= 40:
                                                if f['head_dim'] <= 96:
                                                    return (128, 2, 4)
                                                else:
                                                    return (128, 2, 1)
                                            else:
                                                return (128, 2, 1)
                                else:
                                    return (32, 2, 1)
                    else:
                        if f['programs'] <= 12:
                            if f['max_seqlen_k'] <= 576:
                                if f['kv_bits'] <= 12:
                                    if f['max_seqlen_q'] <= 1:
                                        if f['num_kv_heads'] <= 1:
                                            return (32, 2, 1)
                                        else:
                                            if f['group'] <= 6:
                                                if f['programs'] <= 6:
                                                    return (32, 2, 1)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['num_kv_heads'] <= 5:
                                                            return (32, 2, 1)
                                                        else:
                                                            if f['head_dim'] <= 96:
                                                                return (32, 2, 1)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (32, 2, 1)
                                                                else:
                                                                    return (32, 2, 2)
                                                    else:
                                                        if f['num_seqs'] <= 2:
                                                            return (32, 2, 1)
                                                        else:
                                                            if f['head_dim'] <= 96:
                                                                if f['block_size'] <= 40:
                                                                    return (32, 2, 2)
                                                                else:
                                                                    return (32, 2, 1)
                                                            else:
                                                                return (32, 2, 1)
                                            else:
                                                if f['programs'] <= 6:
                                                    if f['head_dim'] <= 96:
                                                        if f['block_size'] <= 40:
                                                            return (32, 2, 1)
                                                        else:
                                                            return (32, 2, 2)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (32, 2, 2)
                                                        else:
                                                            return (32, 2, 1)
                                                else:
                                                    return (32, 2, 1)
                                    else:
                                        if f['programs'] <= 6:
                                            if f['head_dim'] <= 96:
                                                if f['group'] <= 6:
                                                    if f['group'] <= 2:
                                                        if f['max_seqlen_q'] <= 6:
                                                            return (32, 2, 1)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (32, 2, 1)
                                                            else:
                                                                return 'hand'
                                                    else:
                                                        if f['num_tokens'] <= 12:
                                                            if f['block_size'] <= 40:
                                                                if f['num_tokens'] <= 6:
                                                                    return 'hand'
                                                                else:
                                                                    return (32, 2, 1)
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            return 'hand'
                                                else:
                                                    return (32, 2, 1)
                                            else:
                                                if f['group'] <= 2:
                                                    return (32, 2, 1)
                                                else:
                                                    if f['num_tokens'] <= 12:
                                                        if f['max_seqlen_q'] <= 3:
                                                            if f['num_seqs'] <= 3:
                                                                return (32, 2, 1)
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return (32, 2, 1)
                                                                else:
                                                                    if f['block_size'] <= 40:
                                                                        return (32, 2, 1)
                                                                    else:
                                                                        return (64, 2, 1)
                                                        else:
                                                            if f['group'] <= 6:
                                                                if f['block_size'] <= 40:
                                                                    return (64, 2, 8)
                                                                else:
                                                                    return (64, 2, 1)
                                                            else:
                                                                return (64, 2, 1)
                                                    else:
                                                        return (64, 2, 1)
                                        else:
                                            if f['num_tokens'] <= 48:
                                                if f['block_size'] <= 40:
                                                    if f['head_dim'] <= 96:
                                                        if f['num_tokens'] <= 24:
                                                            return (32, 2, 1)
                                                        else:
                                                            if f['max_seqlen_q'] <= 6:
                                                                return (32, 2, 1)
                                                            else:
                                                                if f['group'] <= 2:
                                                                    return (32, 2, 1)
                                                                else:
                                                                    if f['group'] <= 6:
                                                                        return 'hand'
                                                                    else:
                                                                        return (32, 2, 1)
                                                    else:
                                                        if f['max_seqlen_q'] <= 3:
                                                            return (32, 2, 1)
                                                        else:
                                                            if f['group'] <= 2:
                                                                return (32, 2, 1)
                                                            else:
                                                                if f['num_tokens'] <= 12:
                                                                    if f['group'] <= 6:
                                                                        if f['max_seqlen_q'] <= 6:
                                                                            return (64, 2, 1)
                                                                        else:
                                                                            return (32, 2, 1)
                                                                    else:
                                                                        return (32, 2, 1)
                                                                else:
                                                                    if f['group'] <= 6:
                                                                        if f['max_seqlen_q'] <= 6:
                                                                            return (32, 2, 1)
                                                                        else:
                                                                            return (64, 2, 1)
                                                                    else:
                                                                        if f['max_seqlen_q'] <= 6:
                                                                            return (64, 2, 1)
                                                                        else:
                                                                            return (32, 2, 1)
                                                else:
                                                    return (32, 2, 1)
                                            else:
                                                if f['block_size'] <= 40:
                                                    if f['group'] <= 2:
                                                        return (32, 2, 1)
                                                    else:
                                                        if f['head_dim'] <= 96:
                                                            if f['group'] <= 6:
                                                                return 'hand'
                                                            else:
                                                                return (128, 2, 1)
                                                        else:
                                                            return (64, 2, 1)
                                                else:
                                                    return (32, 2, 1)
                                else:
                                    if f['head_dim'] <= 96:
                                        if f['max_seqlen_q'] <= 3:
                                            if f['num_seqs'] <= 6:
                                                if f['programs'] <= 6:
                                                    if f['num_tokens'] <= 3:
                                                        if f['block_size'] <= 40:
                                                            if f['group'] <= 2:
                                                                return (32, 2, 1)
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return (32, 2, 4)
                                                                else:
                                                                    return (32, 2, 1)
                                                        else:
                                                            return (32, 2, 1)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (32, 2, 1)
                                                        else:
                                                            if f['max_seqlen_q'] <= 1:
                                                                return (32, 2, 1)
                                                            else:
                                                                return 'hand'
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['num_tokens'] <= 2:
                                                            if f['group'] <= 6:
                                                                return (32, 2, 1)
                                                            else:
                                                                return (128, 2, 1)
                                                        else:
                                                            if f['group'] <= 6:
                                                                if f['block_size'] <= 40:
                                                                    if f['group'] <= 2:
                                                                        return (32, 2, 2)
                                                                    else:
                                                                        return (32, 2, 1)
                                                                else:
                                                                    if f['group'] <= 2:
                                                                        return (32, 2, 1)
                                                                    else:
                                                                        return (32, 2, 2)
                                                            else:
                                                                return (32, 2, 1)
                                                    else:
                                                        if f['num_tokens'] <= 5:
                                                            if f['group'] <= 2:
                                                                return (32, 2, 1)
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return 'hand'
                                                                else:
                                                                    return (32, 2, 1)
                                                        else:
                                                            return (32, 2, 1)
                                            else:
                                                if f['group'] <= 2:
                                                    if f['num_tokens'] <= 12:
                                                        if f['block_size'] <= 40:
                                                            return (32, 2, 8)
                                                        else:
                                                            return (32, 2, 1)
                                                    else:
                                                        return (32, 2, 1)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (32, 2, 1)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (32, 2, 1)
                                                        else:
                                                            if f['max_seqlen_q'] <= 1:
                                                                return (32, 2, 1)
                                                            else:
                                                                return 'hand'
                                        else:
                                            if f['group'] <= 2:
                                                if f['max_seqlen_q'] <= 6:
                                                    return (32, 2, 1)
                                                else:
                                                    if f['num_kv_heads'] <= 1:
                                                        return 'hand'
                                                    else:
                                                        if f['num_tokens'] <= 12:
                                                            return 'hand'
                                                        else:
                                                            if f['num_seqs'] <= 3:
                                                                if f['block_size'] <= 40:
                                                                    return 'hand'
                                                                else:
                                                                    return (32, 2, 1)
                                                            else:
                                                                return (32, 2, 1)
                                            else:
                                                if f['num_kv_heads'] <= 5:
                                                    if f['num_tokens'] <= 24:
                                                        if f['programs'] <= 6:
                                                            return 'hand'
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (32, 2, 1)
                                                            else:
                                                                return 'hand'
                                                    else:
                                                        return 'hand'
                                                else:
                                                    if f['group'] <= 6:
                                                        if f['num_tokens'] <= 6:
                                                            return (32, 2, 1)
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        if f['max_seqlen_q'] <= 6:
                                                            return 'hand'
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return 'hand'
                                                            else:
                                                                return (32, 2, 1)
                                    else:
                                        if f['group'] <= 2:
                                            if f['num_tokens'] <= 3:
                                                if f['max_seqlen_q'] <= 1:
                                                    if f['programs'] <= 6:
                                                        return (32, 2, 1)
                                                    else:
                                                        return 'hand'
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (64, 2, 8)
                                                    else:
                                                        return 'hand'
                                            else:
                                                if f['programs'] <= 6:
                                                    if f['max_seqlen_q'] <= 6:
                                                        return (32, 2, 1)
                                                    else:
                                                        return 'hand'
                                                else:
                                                    return 'hand'
                                        else:
                                            if f['num_tokens'] <= 1:
                                                return 'hand'
                                            else:
                                                if f['num_seqs'] <= 3:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['group'] <= 6:
                                                            return (32, 2, 1)
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        if f['group'] <= 6:
                                                            return 'hand'
                                                        else:
                                                            if f['max_seqlen_q'] <= 3:
                                                                return 'hand'
                                                            else:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    if f['num_kv_heads'] <= 5:
                                                                        return (32, 2, 1)
                                                                    else:
                                                                        if f['block_size'] <= 40:
                                                                            return (32, 2, 1)
                                                                        else:
                                                                            return 'hand'
                                                                else:
                                                                    return 'hand'
                                                else:
                                                    if f['num_tokens'] <= 48:
                                                        if f['block_size'] <= 40:
                                                            if f['max_seqlen_q'] <= 1:
                                                                if f['group'] <= 6:
                                                                    return 'hand'
                                                                else:
                                                                    if f['programs'] <= 6:
                                                                        return 'hand'
                                                                    else:
                                                                        return (32, 2, 1)
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return 'hand'
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (128, 2, 1)
                                                            else:
                                                                return 'hand'
                            else:
                                if f['max_seqlen_k'] <= 704:
                                    return (32, 2, 8)
                                else:
                                    if f['num_tokens'] <= 1:
                                        if f['kv_bits'] <= 12:
                                            if f['head_dim'] <= 96:
                                                return (32, 2, 4)
                                            else:
                                                return (32, 2, 2)
                                        else:
                                            if f['group'] <= 6:
                                                if f['max_seqlen_k'] <= 1408:
                                                    return (32, 2, 4)
                                                else:
                                                    if f['head_dim'] <= 96:
                                                        return (32, 2, 4)
                                                    else:
                                                        if f['group'] <= 2:
                                                            return (32, 2, 4)
                                                        else:
                                                            return (32, 2, 2)
                                            else:
                                                if f['head_dim'] <= 96:
                                                    if f['block_size'] <= 40:
                                                        return (32, 2, 2)
                                                    else:
                                                        return (32, 2, 4)
                                                else:
                                                    return (32, 2, 2)
                                    else:
                                        if f['head_dim'] <= 96:
                                            if f['programs'] <= 6:
                                                if f['max_seqlen_q'] <= 6:
                                                    if f['num_tokens'] <= 3:
                                                        if f['group'] <= 6:
                                                            return (32, 2, 2)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                if f['kv_bits'] <= 12:
                                                                    return (32, 2, 4)
                                                                else:
                                                                    return (32, 2, 2)
                                                            else:
                                                                return (32, 2, 2)
                                                    else:
                                                        if f['max_seqlen_q'] <= 1:
                                                            if f['kv_bits'] <= 12:
                                                                if f['block_size'] <= 40:
                                                                    return (32, 2, 2)
                                                                else:
                                                                    if f['group'] <= 2:
                                                                        return (32, 2, 2)
                                                                    else:
                                                                        if f['group'] <= 6:
                                                                            return (32, 2, 8)
                                                                        else:
                                                                            return (32, 2, 2)
                                                            else:
                                                                return (32, 2, 2)
                                                        else:
                                                            if f['group'] <= 6:
                                                                if f['num_tokens'] <= 12:
                                                                    return (32, 2, 2)
                                                                else:
                                                                    if f['kv_bits'] <= 12:
                                                                        if f['group'] <= 2:
                                                                            return (32, 2, 2)
                                                                        else:
                                                                            if f['block_size'] <= 40:
                                                                                return (32, 2, 2)
                                                                            else:
                                                                                return (32, 2, 1)
                                                                    else:
                                                                        return (32, 2, 2)
                                                            else:
                                                                if f['max_seqlen_q'] <= 3:
                                                                    return (32, 2, 2)
                                                                else:
                                                                    if f['num_tokens'] <= 12:
                                                                        if f['block_size'] <= 40:
                                                                            return (32, 2, 2)
                                                                        else:
                                                                            return (32, 2, 1)
                                                                    else:
                                                                        return (32, 2, 1)
                                                else:
                                                    if f['group'] <= 2:
                                                        return (32, 2, 2)
                                                    else:
                                                        return (32, 2, 1)
                                            else:
                                                if f['group'] <= 2:
                                                    if f['num_tokens'] <= 48:
                                                        if f['num_tokens'] <= 24:
                                                            return (32, 2, 4)
                                                        else:
                                                            if f['max_seqlen_q'] <= 6:
                                                                return (32, 2, 4)
                                                            else:
                                                                if f['kv_bits'] <= 12:
                                                                    if f['block_size'] <= 40:
                                                                        return (128, 2, 1)
                                                                    else:
                                                                        return (32, 2, 2)
                                                                else:
                                                                    if f['block_size'] <= 40:
                                                                        return (32, 2, 2)
                                                                    else:
                                                                        return (32, 2, 4)
                                                    else:
                                                        if f['kv_bits'] <= 12:
                                                            if f['block_size'] <= 40:
                                                                return (128, 2, 1)
                                                            else:
                                                                return (32, 2, 2)
                                                        else:
                                                            return (32, 2, 2)
                                                else:
                                                    if f['max_seqlen_q'] <= 3:
                                                        if f['group'] <= 6:
                                                            if f['num_tokens'] <= 12:
                                                                if f['num_tokens'] <= 6:
                                                                    return (32, 2, 4)
                                                                else:
                                                                    if f['num_seqs'] <= 6:
                                                                        if f['kv_bits'] <= 12:
                                                                            if f['block_size'] <= 40:
                                                                                return (32, 2, 4)
                                                                            else:
                                                                                return (32, 2, 2)
                                                                        else:
                                                                            if f['block_size'] <= 40:
                                                                                return (32, 2, 2)
                                                                            else:
                                                                                return (32, 2, 4)
                                                                    else:
                                                                        return (32, 2, 4)
                                                            else:
                                                                return (32, 2, 2)
                                                        else:
                                                            if f['kv_bits'] <= 12:
                                                                if f['max_seqlen_q'] <= 1:
                                                                    return (32, 2, 2)
                                                                else:
                                                                    if f['block_size'] <= 40:
                                                                        if f['num_seqs'] <= 2:
                                                                            return (128, 2, 1)
                                                                        else:
                                                                            return (32, 2, 2)
                                                                    else:
                                                                        return (128, 2, 1)
                                                            else:
                                                                return (32, 2, 2)
                                                    else:
                                                        if f['kv_bits'] <= 12:
                                                            return (128, 2, 1)
                                                        else:
                                                            if f['group'] <= 6:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    if f['num_tokens'] <= 10:
                                                                        return (32, 2, 4)
                                                                    else:
                                                                        return (32, 2, 2)
                                                                else:
                                                                    return (128, 2, 1)
                                                            else:
                                                                return (128, 2, 1)
                                        else:
                                            if f['max_seqlen_q'] <= 3:
                                                if f['programs'] <= 6:
                                                    if f['kv_bits'] <= 12:
                                                        if f['group'] <= 6:
                                                            if f['max_seqlen_q'] <= 1:
                                                                return (32, 2, 2)
                                                            else:
                                                                if f['group'] <= 2:
                                                                    return (32, 2, 2)
                                                                else:
                                                                    if f['num_seqs'] <= 3:
                                                                        return 'hand'
                                                                    else:
                                                                        if f['block_size'] <= 40:
                                                                            return (32, 2, 1)
                                                                        else:
                                                                            return 'hand'
                                                        else:
                                                            if f['num_kv_heads'] <= 1:
                                                                if f['block_size'] <= 40:
                                                                    return (32, 2, 1)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                return 'hand'
                                                    else:
                                                        return (32, 2, 2)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['kv_bits'] <= 12:
                                                            return (32, 2, 2)
                                                        else:
                                                            if f['num_kv_heads'] <= 1:
                                                                if f['num_tokens'] <= 12:
                                                                    if f['block_size'] <= 40:
                                                                        return (32, 2, 8)
                                                                    else:
                                                                        return (32, 2, 4)
                                                                else:
                                                                    if f['block_size'] <= 40:
                                                                        return (32, 2, 4)
                                                                    else:
                                                                        return (32, 2, 2)
                                                            else:
                                                                if f['num_seqs'] <= 2:
                                                                    if f['block_size'] <= 40:
                                                                        return (32, 2, 4)
                                                                    else:
                                                                        return (32, 2, 2)
                                                                else:
                                                                    return (32, 2, 4)
                                                    else:
                                                        if f['num_kv_heads'] <= 5:
                                                            return (32, 2, 2)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (32, 2, 2)
                                                            else:
                                                                if f['kv_bits'] <= 12:
                                                                    if f['group'] <= 6:
                                                                        return (32, 2, 2)
                                                                    else:
                                                                        return (64, 2, 1)
                                                                else:
                                                                    return (32, 2, 2)
                                            else:
                                                if f['group'] <= 2:
                                                    if f['kv_bits'] <= 12:
                                                        if f['max_seqlen_q'] <= 6:
                                                            return (32, 2, 2)
                                                        else:
                                                            if f['programs'] <= 6:
                                                                if f['block_size'] <= 40:
                                                                    return (32, 2, 1)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                if f['num_seqs'] <= 2:
                                                                    if f['block_size'] <= 40:
                                                                        return (32, 2, 2)
                                                                    else:
                                                                        return (64, 2, 1)
                                                                else:
                                                                    return (32, 2, 2)
                                                    else:
                                                        if f['num_tokens'] <= 6:
                                                            if f['block_size'] <= 40:
                                                                return (32, 2, 4)
                                                            else:
                                                                return (32, 2, 2)
                                                        else:
                                                            return (32, 2, 2)
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        if f['programs'] <= 6:
                                                            if f['block_size'] <= 40:
                                                                return (32, 2, 1)
                                                            else:
                                                                if f['num_tokens'] <= 12:
                                                                    return 'hand'
                                                                else:
                                                                    if f['num_tokens'] <= 24:
                                                                        if f['num_kv_heads'] <= 1:
                                                                            if f['group'] <= 6:
                                                                                return 'hand'
                                                                            else:
                                                                                return (32, 2, 1)
                                                                        else:
                                                                            if f['group'] <= 6:
                                                                                return (32, 2, 1)
                                                                            else:
                                                                                return 'hand'
                                                                    else:
                                                                        return (32, 2, 1)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                if f['num_seqs'] <= 2:
                                                                    return (128, 2, 1)
                                                                else:
                                                                    return (32, 2, 2)
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return (64, 2, 1)
                                                                else:
                                                                    if f['max_seqlen_q'] <= 6:
                                                                        return (64, 2, 1)
                                                                    else:
                                                                        if f['num_kv_heads'] <= 5:
                                                                            return (32, 2, 2)
                                                                        else:
                                                                            return (128, 2, 1)
                                                    else:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['group'] <= 6:
                                                                if f['num_kv_heads'] <= 1:
                                                                    if f['programs'] <= 6:
                                                                        return (32, 2, 1)
                                                                    else:
                                                                        return (32, 2, 2)
                                                                else:
                                                                    return (32, 2, 2)
                                                            else:
                                                                if f['num_tokens'] <= 24:
                                                                    if f['num_tokens'] <= 12:
                                                                        return 'hand'
                                                                    else:
                                                                        if f['num_kv_heads'] <= 1:
                                                                            return 'hand'
                                                                        else:
                                                                            if f['block_size'] <= 40:
                                                                                return 'hand'
                                                                            else:
                                                                                return (32, 2, 2)
                                                                else:
                                                                    return (32, 2, 2)
                                                        else:
                                                            return 'hand'
                        else:
                            if f['programs'] <= 96:
                                if f['kv_bits'] <= 12:
                                    if f['head_dim'] <= 96:
                                        if f['max_seqlen_k'] <= 1280:
                                            if f['programs'] <= 48:
                                                if f['programs'] <= 24:
                                                    if f['max_seqlen_q'] <= 3:
                                                        return (32, 2, 2)
                                                    else:
                                                        if f['group'] <= 2:
                                                            if f['num_seqs'] <= 5:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    return (32, 2, 2)
                                                                else:
                                                                    if f['block_size'] <= 40:
                                                                        return (128, 2, 1)
                                                                    else:
                                                                        return (32, 2, 2)
                                                            else:
                                                                return (32, 2, 2)
                                                        else:
                                                            if f['group'] <= 6:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    if f['num_kv_heads'] <= 5:
                                                                        return (32, 2, 2)
                                                                    else:
                                                                        if f['block_size'] <= 40:
                                                                            return (128, 2, 1)
                                                                        else:
                                                                            return (32, 2, 2)
                                                                else:
                                                                    if f['num_kv_heads'] <= 1:
                                                                        if f['block_size'] <= 40:
                                                                            return (128, 2, 1)
                                                                        else:
                                                                            return (32, 2, 2)
                                                                    else:
                                                                        return (128, 2, 1)
                                                            else:
                                                                if f['num_kv_heads'] <= 1:
                                                                    if f['block_size'] <= 40:
                                                                        return (128, 2, 1)
                                                                    else:
                                                                        if f['num_tokens'] <= 96:
                                                                            return (32, 2, 2)
                                                                        else:
                                                                            return (128, 2, 1)
                                                                else:
                                                                    return (128, 2, 1)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['num_kv_heads'] <= 5:
                                                                return 'hand'
                                                            else:
                                                                if f['num_tokens'] <= 6:
                                                                    return 'hand'
                                                                else:
                                                                    if f['num_tokens'] <= 12:
                                                                        if f['block_size'] <= 40:
                                                                            return (128, 2, 1)
                                                                        else:
                                                                            return 'hand'
                                                                    else:
                                                                        return (128, 2, 1)
                                                        else:
                                                            return (128, 2, 1)
                                                    else:
                                                        if f['num_tokens'] <= 48:
                                                            if f['group'] <= 6:
                                                                if f['num_kv_heads'] <= 5:
                                                                    if f['max_seqlen_q'] <= 1:
                                                                        return 'hand'
                                                                    else:
                                                                        return (128, 2, 1)
                                                                else:
                                                                    return (128, 2, 1)
                                                            else:
                                                                return (128, 2, 1)
                                                        else:
                                                            if f['num_kv_heads'] <= 1:
                                                                return (128, 2, 1)
                                                            else:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    if f['block_size'] <= 40:
                                                                        return (128, 2, 1)
                                                                    else:
                                                                        if f['group'] <= 6:
                                                                            return (128, 2, 1)
                                                                        else:
                                                                            return (128, 2, 8)
                                                                else:
                                                                    return (128, 2, 1)
                                            else:
                                                return (128, 2, 2)
                                        else:
                                            if f['programs'] <= 48:
                                                if f['programs'] <= 24:
                                                    if f['max_seqlen_q'] <= 1:
                                                        return (32, 2, 4)
                                                    else:
                                                        if f['max_seqlen_q'] <= 3:
                                                            if f['group'] <= 2:
                                                                return (32, 2, 4)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 2, 2)
                                                                else:
                                                                    if f['group'] <= 6:
                                                                        return (128, 2, 2)
                                                                    else:
                                                                        if f['num_tokens'] <= 10:
                                                                            return (128, 2, 2)
                                                                        else:
                                                                            if f['num_tokens'] <= 24:
                                                                                return (128, 2, 8)
                                                                            else:
                                                                                return (128, 2, 2)
                                                        else:
                                                            if f['group'] <= 2:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    return (32, 2, 4)
                                                                else:
                                                                    return (128, 2, 2)
                                                            else:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    return (128, 2, 2)
                                                                else:
                                                                    if f['block_size'] <= 40:
                                                                        return (128, 2, 2)
                                                                    else:
                                                                        if f['group'] <= 6:
                                                                            return (128, 2, 2)
                                                                        else:
                                                                            if f['num_seqs'] <= 5:
                                                                                return (128, 2, 2)
                                                                            else:
                                                                                return (32, 2, 4)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['max_seqlen_q'] <= 1:
                                                            if f['block_size'] <= 40:
                                                                return (128, 2, 2)
                                                            else:
                                                                if f['num_seqs'] <= 24:
                                                                    return 'hand'
                                                                else:
                                                                    return (128, 2, 2)
                                                        else:
                                                            return (128, 2, 2)
                                                    else:
                                                        if f['num_tokens'] <= 6:
                                                            if f['group'] <= 6:
                                                                return (128, 2, 2)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return 'hand'
                                                                else:
                                                                    return (128, 2, 2)
                                                        else:
                                                            return (128, 2, 2)
                                            else:
                                                if f['max_seqlen_q'] <= 1:
                                                    if f['group'] <= 6:
                                                        if f['block_size'] <= 40:
                                                            return 'hand'
                                                        else:
                                                            if f['group'] <= 2:
                                                                return (128, 2, 2)
                                                            else:
                                                                return 'hand'
                                                    else:
                                                        if f['num_seqs'] <= 48:
                                                            if f['block_size'] <= 40:
                                                                if f['num_tokens'] <= 20:
                                                                    return (64, 2, 4)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                if f['num_tokens'] <= 20:
                                                                    return 'hand'
                                                                else:
                                                                    return (64, 2, 4)
                                                        else:
                                                            return 'hand'
                                                else:
                                                    if f['max_seqlen_q'] <= 3:
                                                        if f['group'] <= 2:
                                                            if f['block_size'] <= 40:
                                                                return 'hand'
                                                            else:
                                                                if f['num_kv_heads'] <= 5:
                                                                    return (128, 2, 2)
                                                                else:
                                                                    return 'hand'
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        return 'hand'
                                    else:
                                        if f['max_seqlen_k'] <= 1280:
                                            if f['programs'] <= 48:
                                                if f['max_seqlen_q'] <= 6:
                                                    if f['group'] <= 2:
                                                        return (32, 2, 2)
                                                    else:
                                                        if f['max_seqlen_q'] <= 1:
                                                            if f['num_tokens'] <= 12:
                                                                if f['num_seqs'] <= 6:
                                                                    if f['num_seqs'] <= 3:
                                                                        if f['group'] <= 6:
                                                                            return (32, 2, 2)
                                                                        else:
                                                                            return (64, 2, 1)
                                                                    else:
                                                                        return (32, 2, 2)
                                                                else:
                                                                    if f['group'] <= 6:
                                                                        if f['block_size'] <= 40:
                                                                            return (32, 2, 2)
                                                                        else:
                                                                            return (64, 2, 2)
                                                                    else:
                                                                        return (64, 2, 1)
                                                            else:
                                                                return (32, 2, 2)
                                                        else:
                                                            if f['programs'] <= 24:
                                                                if f['num_kv_heads'] <= 1:
                                                                    if f['num_tokens'] <= 48:
                                                                        if f['group'] <= 6:
                                                                            return (32, 2, 2)
                                                                        else:
                                                                            if f['block_size'] <= 40:
                                                                                return (32, 2, 1)
                                                                            else:
                                                                                return (64, 2, 1)
                                                                    else:
                                                                        if f['group'] <= 6:
                                                                            if f['block_size'] <= 40:
                                                                                return (32, 2, 1)
                                                                            else:
                                                                                return (64, 2, 1)
                                                                        else:
                                                                            return (64, 2, 1)
                                                                else:
                                                                    return (64, 2, 1)
                                                            else:
                                                                if f['max_seqlen_q'] <= 3:
                                                                    if f['group'] <= 6:
                                                                        return (32, 2, 2)
                                                                    else:
                                                                        return (64, 2, 1)
                                                                else:
                                                                    if f['block_size'] <= 40:
                                                                        if f['group'] <= 6:
                                                                            return (128, 2, 1)
                                                                        else:
                                                                            if f['num_kv_heads'] <= 5:
                                                                                return (64, 2, 2)
                                                                            else:
                                                                                return (128, 2, 1)
                                                                    else:
                                                                        if f['group'] <= 6:
                                                                            return (64, 2, 1)
                                                                        else:
                                                                            return (128, 2, 1)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['num_seqs'] <= 3:
                                                            if f['block_size'] <= 40:
                                                                return 'hand'
                                                            else:
                                                                return (64, 2, 1)
                                                        else:
                                                            if f['num_tokens'] <= 192:
                                                                if f['num_seqs'] <= 12:
                                                                    if f['programs'] <= 24:
                                                                        if f['block_size'] <= 40:
                                                                            return (64, 2, 1)
                                                                        else:
                                                                            return (32, 2, 2)
                                                                    else:
                                                                        return (32, 2, 2)
                                                                else:
                                                                    return (32, 2, 2)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (32, 2, 2)
                                                                else:
                                                                    return 'hand'
                                                    else:
                                                        if f['programs'] <= 24:
                                                            if f['num_kv_heads'] <= 1:
                                                                if f['block_size'] <= 40:
                                                                    if f['group'] <= 6:
                                                                        return (32, 2, 1)
                                                                    else:
                                                                        return (64, 2, 1)
                                                                else:
                                                                    return (64, 2, 1)
                                                            else:
                                                                return (64, 2, 1)
                                                        else:
                                                            return (64, 2, 2)
                                            else:
                                                return (64, 2, 2)
                                        else:
                                            if f['programs'] <= 48:
                                                if f['group'] <= 2:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['block_size'] <= 40:
                                                            return (64, 2, 2)
                                                        else:
                                                            if f['num_seqs'] <= 3:
                                                                return (64, 2, 2)
                                                            else:
                                                                return (128, 2, 2)
                                                    else:
                                                        return (64, 2, 2)
                                                else:
                                                    return (64, 2, 2)
                                            else:
                                                if f['max_seqlen_q'] <= 3:
                                                    if f['num_tokens'] <= 48:
                                                        if f['group'] <= 6:
                                                            if f['max_seqlen_q'] <= 1:
                                                                if f['num_tokens'] <= 20:
                                                                    if f['block_size'] <= 40:
                                                                        if f['group'] <= 2:
                                                                            return 'hand'
                                                                        else:
                                                                            return (128, 2, 2)
                                                                    else:
                                                                        return (128, 2, 2)
                                                                else:
                                                                    if f['block_size'] <= 40:
                                                                        return (128, 2, 2)
                                                                    else:
                                                                        if f['group'] <= 2:
                                                                            return (128, 2, 2)
                                                                        else:
                                                                            return 'hand'
                                                            else:
                                                                return (128, 2, 2)
                                                        else:
                                                            return (128, 2, 2)
                                                    else:
                                                        return (128, 2, 2)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['block_size'] <= 40:
                                                            if f['num_tokens'] <= 192:
                                                                return (128, 2, 2)
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        return 'hand'
                                else:
                                    if f['programs'] <= 48:
                                        if f['max_seqlen_k'] <= 1280:
                                            if f['head_dim'] <= 96:
                                                if f['group'] <= 2:
                                                    if f['max_seqlen_q'] <= 3:
                                                        if f['programs'] <= 24:
                                                            if f['num_tokens'] <= 3:
                                                                if f['block_size'] <= 40:
                                                                    return 'hand'
                                                                else:
                                                                    return (32, 2, 2)
                                                            else:
                                                                return (32, 2, 2)
                                                        else:
                                                            if f['max_seqlen_q'] <= 1:
                                                                return (32, 2, 4)
                                                            else:
                                                                if f['num_tokens'] <= 20:
                                                                    if f['block_size'] <= 40:
                                                                        return (32, 2, 4)
                                                                    else:
                                                                        return 'hand'
                                                                else:
                                                                    return 'hand'
                                                    else:
                                                        if f['programs'] <= 24:
                                                            if f['max_seqlen_q'] <= 6:
                                                                if f['block_size'] <= 40:
                                                                    if f['num_tokens'] <= 20:
                                                                        return 'hand'
                                                                    else:
                                                                        return (32, 2, 2)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            return 'hand'
                                                else:
                                                    if f['num_seqs'] <= 24:
                                                        if f['num_seqs'] <= 3:
                                                            if f['num_tokens'] <= 6:
                                                                if f['max_seqlen_q'] <= 1:
                                                                    if f['group'] <= 6:
                                                                        if f['block_size'] <= 40:
                                                                            return (128, 2, 1)
                                                                        else:
                                                                            return 'hand'
                                                                    else:
                                                                        return (128, 2, 1)
                                                                else:
                                                                    if f['group'] <= 6:
                                                                        return (128, 2, 1)
                                                                    else:
                                                                        if f['block_size'] <= 40:
                                                                            return 'hand'
                                                                        else:
                                                                            return (128, 2, 1)
                                                            else:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    if f['block_size'] <= 40:
                                                                        return 'hand'
                                                                    else:
                                                                        if f['group'] <= 6:
                                                                            return 'hand'
                                                                        else:
                                                                            return (128, 2, 1)
                                                                else:
                                                                    return 'hand'
                                                        else:
                                                            if f['num_tokens'] <= 6:
                                                                if f['group'] <= 6:
                                                                    return (32, 2, 4)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                if f['group'] <= 6:
                                                                    if f['max_seqlen_q'] <= 3:
                                                                        if f['max_seqlen_q'] <= 1:
                                                                            if f['num_seqs'] <= 12:
                                                                                if f['block_size'] <= 40:
                                                                                    return (32, 2, 2)
                                                                                else:
                                                                                    return 'hand'
                                                                            else:
                                                                                return (32, 2, 2)
                                                                        else:
                                                                            if f['programs'] <= 24:
                                                                                if f['num_kv_heads'] <= 1:
                                                                                    return (128, 2, 1)
                                                                                else:
                                                                                    if f['block_size'] <= 40:
                                                                                        return (128, 2, 1)
                                                                                    else:
                                                                                        return 'hand'
                                                                            else:
                                                                                return 'hand'
                                                                    else:
                                                                        return (128, 2, 1)
                                                                else:
                                                                    if f['max_seqlen_q'] <= 6:
                                                                        if f['num_tokens'] <= 12:
                                                                            return (128, 2, 1)
                                                                        else:
                                                                            if f['num_tokens'] <= 24:
                                                                                if f['num_seqs'] <= 6:
                                                                                    return (128, 2, 1)
                                                                                else:
                                                                                    if f['programs'] <= 24:
                                                                                        if f['max_seqlen_q'] <= 1:
                                                                                            return (128, 2, 1)
                                                                                        else:
                                                                                            if f['block_size'] <= 40:
                                                                                                return 'hand'
                                                                                            else:
                                                                                                return (128, 2, 1)
                                                                                    else:
                                                                                        return 'hand'
                                                                            else:
                                                                                return (128, 2, 1)
                                                                    else:
                                                                        if f['programs'] <= 24:
                                                                            return 'hand'
                                                                        else:
                                                                            if f['block_size'] <= 40:
                                                                                if f['num_kv_heads'] <= 5:
                                                                                    return 'hand'
                                                                                else:
                                                                                    return (128, 2, 1)
                                                                            else:
                                                                                return (128, 2, 1)
                                                    else:
                                                        if f['num_tokens'] <= 48:
                                                            if f['group'] <= 6:
                                                                return (32, 2, 2)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 3, 0)
                                                                else:
                                                                    return 'hand'
                                                        else:
                                                            if f['max_seqlen_q'] <= 3:
                                                                if f['group'] <= 6:
                                                                    return 'hand'
                                                                else:
                                                                    return (128, 2, 1)
                                                            else:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    return (128, 2, 1)
                                                                else:
                                                                    if f['group'] <= 6:
                                                                        return (128, 2, 1)
                                                                    else:
                                                                        return 'hand'
                                            else:
                                                if f['max_seqlen_q'] <= 1:
                                                    if f['num_seqs'] <= 3:
                                                        return 'hand'
                                                    else:
                                                        if f['num_tokens'] <= 6:
                                                            if f['group'] <= 6:
                                                                if f['block_size'] <= 40:
                                                                    return (32, 2, 4)
                                                                else:
                                                                    if f['group'] <= 2:
                                                                        return 'hand'
                                                                    else:
                                                                        return (32, 2, 4)
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            if f['programs'] <= 24:
                                                                if f['group'] <= 6:
                                                                    if f['num_tokens'] <= 12:
                                                                        if f['block_size'] <= 40:
                                                                            return 'hand'
                                                                        else:
                                                                            if f['group'] <= 2:
                                                                                return 'hand'
                                                                            else:
                                                                                return (32, 2, 2)
                                                                    else:
                                                                        if f['block_size'] <= 40:
                                                                            if f['group'] <= 2:
                                                                                return (32, 2, 2)
                                                                            else:
                                                                                return 'hand'
                                                                        else:
                                                                            return (32, 2, 2)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                return 'hand'
                                                else:
                                                    if f['num_tokens'] <= 12:
                                                        if f['num_seqs'] <= 3:
                                                            return 'hand'
                                                        else:
                                                            if f['group'] <= 2:
                                                                if f['block_size'] <= 40:
                                                                    return (32, 2, 4)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                return 'hand'
                                                    else:
                                                        return 'hand'
                                        else:
                                            if f['programs'] <= 24:
                                                if f['max_seqlen_q'] <= 3:
                                                    return (32, 2, 4)
                                                else:
                                                    if f['group'] <= 2:
                                                        return (32, 2, 4)
                                                    else:
                                                        if f['head_dim'] <= 96:
                                                            if f['block_size'] <= 40:
                                                                if f['group'] <= 6:
                                                                    if f['max_seqlen_q'] <= 6:
                                                                        return (32, 2, 4)
                                                                    else:
                                                                        return (128, 2, 2)
                                                                else:
                                                                    if f['max_seqlen_q'] <= 6:
                                                                        return (128, 2, 2)
                                                                    else:
                                                                        if f['num_tokens'] <= 40:
                                                                            return (32, 2, 4)
                                                                        else:
                                                                            if f['num_tokens'] <= 96:
                                                                                return (128, 2, 2)
                                                                            else:
                                                                                return (32, 2, 4)
                                                            else:
                                                                if f['num_tokens'] <= 48:
                                                                    return (32, 2, 4)
                                                                else:
                                                                    if f['num_kv_heads'] <= 1:
                                                                        return (32, 2, 4)
                                                                    else:
                                                                        if f['group'] <= 6:
                                                                            return (128, 2, 2)
                                                                        else:
                                                                            return (32, 2, 4)
                                                        else:
                                                            if f['group'] <= 6:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    return (32, 2, 4)
                                                                else:
                                                                    return (64, 2, 2)
                                                            else:
                                                                if f['num_tokens'] <= 96:
                                                                    return (64, 2, 2)
                                                                else:
                                                                    return (32, 2, 2)
                                            else:
                                                if f['head_dim'] <= 96:
                                                    if f['max_seqlen_q'] <= 6:
                                                        if f['group'] <= 6:
                                                            if f['num_kv_heads'] <= 5:
                                                                return 'hand'
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    if f['group'] <= 2:
                                                                        return 'hand'
                                                                    else:
                                                                        return (32, 2, 4)
                                                                else:
                                                                    return 'hand'
                                                        else:
                                                            if f['max_seqlen_q'] <= 3:
                                                                if f['num_kv_heads'] <= 5:
                                                                    return 'hand'
                                                                else:
                                                                    return (32, 2, 4)
                                                            else:
                                                                return (128, 2, 2)
                                                    else:
                                                        if f['group'] <= 2:
                                                            return 'hand'
                                                        else:
                                                            return (128, 2, 2)
                                                else:
                                                    if f['max_seqlen_q'] <= 6:
                                                        if f['max_seqlen_q'] <= 3:
                                                            return (32, 2, 4)
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (32, 2, 4)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (64, 2, 2)
                                                                else:
                                                                    return (128, 2, 2)
                                                    else:
                                                        if f['group'] <= 2:
                                                            return (32, 2, 4)
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (64, 2, 2)
                                                            else:
                                                                return 'hand'
                                    else:
                                        if f['max_seqlen_k'] <= 1280:
                                            if f['head_dim'] <= 96:
                                                if f['group'] <= 6:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['group'] <= 2:
                                                            if f['block_size'] <= 40:
                                                                return (128, 3, 0)
                                                            else:
                                                                if f['num_kv_heads'] <= 1:
                                                                    return (64, 2, 4)
                                                                else:
                                                                    return (32, 2, 4)
                                                        else:
                                                            if f['num_seqs'] <= 20:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 3, 0)
                                                                else:
                                                                    return (32, 2, 4)
                                                            else:
                                                                if f['num_kv_heads'] <= 1:
                                                                    if f['block_size'] <= 40:
                                                                        return (128, 3, 0)
                                                                    else:
                                                                        return (32, 2, 4)
                                                                else:
                                                                    return (32, 2, 4)
                                                    else:
                                                        if f['group'] <= 2:
                                                            if f['max_seqlen_q'] <= 6:
                                                                return (32, 2, 4)
                                                            else:
                                                                if f['num_seqs'] <= 48:
                                                                    return (128, 2, 2)
                                                                else:
                                                                    if f['block_size'] <= 40:
                                                                        return (128, 2, 2)
                                                                    else:
                                                                        return (128, 2, 0)
                                                        else:
                                                            if f['num_tokens'] <= 96:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    return (128, 2, 2)
                                                                else:
                                                                    if f['block_size'] <= 40:
                                                                        return (128, 2, 2)
                                                                    else:
                                                                        return (128, 2, 0)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    if f['num_tokens'] <= 192:
                                                                        return (128, 2, 2)
                                                                    else:
                                                                        if f['num_kv_heads'] <= 1:
                                                                            return (128, 2, 0)
                                                                        else:
                                                                            return (128, 2, 2)
                                                                else:
                                                                    return (128, 2, 0)
                                                else:
                                                    if f['num_tokens'] <= 96:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['max_seqlen_q'] <= 1:
                                                                if f['block_size'] <= 40:
                                                                    if f['num_seqs'] <= 48:
                                                                        return (128, 3, 0)
                                                                    else:
                                                                        return (128, 2, 2)
                                                                else:
                                                                    return (128, 2, 2)
                                                            else:
                                                                return (128, 2, 2)
                                                        else:
                                                            return (128, 2, 0)
                                                    else:
                                                        if f['num_tokens'] <= 192:
                                                            if f['block_size'] <= 40:
                                                                return (128, 2, 2)
                                                            else:
                                                                return (128, 2, 0)
                                                        else:
                                                            return (128, 2, 0)
                                            else:
                                                if f['group'] <= 2:
                                                    if f['max_seqlen_q'] <= 3:
                                                        return (32, 2, 4)
                                                    else:
                                                        return (128, 3, 0)
                                                else:
                                                    return (128, 3, 0)
                                        else:
                                            if f['head_dim'] <= 96:
                                                if f['max_seqlen_q'] <= 6:
                                                    if f['group'] <= 6:
                                                        return (64, 2, 4)
                                                    else:
                                                        if f['max_seqlen_q'] <= 3:
                                                            return (64, 2, 4)
                                                        else:
                                                            return 'hand'
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['block_size'] <= 40:
                                                            if f['num_kv_heads'] <= 1:
                                                                return (64, 2, 4)
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            return (64, 2, 4)
                                                    else:
                                                        return 'hand'
                                            else:
                                                if f['num_seqs'] <= 48:
                                                    if f['group'] <= 2:
                                                        if f['max_seqlen_q'] <= 6:
                                                            return (32, 2, 4)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (64, 2, 2)
                                                            else:
                                                                return (32, 2, 4)
                                                    else:
                                                        if f['max_seqlen_q'] <= 3:
                                                            if f['max_seqlen_q'] <= 1:
                                                                if f['block_size'] <= 40:
                                                                    if f['num_tokens'] <= 20:
                                                                        return (32, 2, 4)
                                                                    else:
                                                                        if f['group'] <= 6:
                                                                            return (32, 2, 4)
                                                                        else:
                                                                            return (64, 2, 2)
                                                                else:
                                                                    return (32, 2, 4)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (64, 2, 2)
                                                                else:
                                                                    if f['group'] <= 6:
                                                                        return (32, 2, 4)
                                                                    else:
                                                                        return (64, 2, 2)
                                                        else:
                                                            if f['max_seqlen_q'] <= 6:
                                                                if f['group'] <= 6:
                                                                    return (64, 2, 2)
                                                                else:
                                                                    return (128, 2, 1)
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return (128, 2, 1)
                                                                else:
                                                                    return (64, 3, 1)
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['group'] <= 2:
                                                            return (64, 2, 2)
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (32, 2, 4)
                                                            else:
                                                                return (64, 2, 2)
                                                    else:
                                                        if f['group'] <= 2:
                                                            if f['max_seqlen_q'] <= 6:
                                                                return (32, 2, 4)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (64, 2, 2)
                                                                else:
                                                                    return (32, 2, 4)
                                                        else:
                                                            if f['max_seqlen_q'] <= 6:
                                                                if f['group'] <= 6:
                                                                    if f['max_seqlen_q'] <= 3:
                                                                        if f['block_size'] <= 40:
                                                                            return (64, 2, 2)
                                                                        else:
                                                                            return (32, 2, 4)
                                                                    else:
                                                                        return (64, 2, 2)
                                                                else:
                                                                    if f['num_tokens'] <= 192:
                                                                        return (64, 2, 2)
                                                                    else:
                                                                        return (128, 2, 1)
                                                            else:
                                                                if f['group'] <= 6:
                                                                    if f['block_size'] <= 40:
                                                                        return (128, 2, 1)
                                                                    else:
                                                                        return (128, 2, 2)
                                                                else:
                                                                    return (64, 3, 1)
                            else:
                                if f['head_dim'] <= 96:
                                    if f['max_seqlen_k'] <= 1280:
                                        if f['kv_bits'] <= 12:
                                            if f['max_seqlen_q'] <= 1:
                                                if f['group'] <= 2:
                                                    return (128, 2, 1)
                                                else:
                                                    return (64, 2, 2)
                                            else:
                                                return (64, 2, 2)
                                        else:
                                            if f['group'] <= 2:
                                                return (128, 2, 1)
                                            else:
                                                if f['max_seqlen_q'] <= 3:
                                                    if f['max_seqlen_q'] <= 1:
                                                        return (128, 2, 1)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (128, 2, 1)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                if f['num_seqs'] <= 96:
                                                                    return (128, 2, 1)
                                                                else:
                                                                    return (128, 3, 0)
                                                            else:
                                                                return (128, 2, 0)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        if f['group'] <= 6:
                                                            if f['num_tokens'] <= 384:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    return (128, 2, 1)
                                                                else:
                                                                    return (128, 2, 0)
                                                            else:
                                                                return (128, 2, 0)
                                                        else:
                                                            return (128, 3, 0)
                                                    else:
                                                        return (128, 2, 0)
                                    else:
                                        if f['group'] <= 2:
                                            if f['max_seqlen_q'] <= 3:
                                                if f['kv_bits'] <= 12:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['block_size'] <= 40:
                                                            return (128, 2, 2)
                                                        else:
                                                            if f['num_tokens'] <= 40:
                                                                return (128, 2, 2)
                                                            else:
                                                                return (128, 3, 2)
                                                    else:
                                                        if f['num_kv_heads'] <= 1:
                                                            return (128, 3, 2)
                                                        else:
                                                            if f['num_seqs'] <= 40:
                                                                return 'hand'
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 3, 2)
                                                                else:
                                                                    return 'hand'
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        return (64, 2, 4)
                                                    else:
                                                        if f['num_seqs'] <= 40:
                                                            if f['block_size'] <= 40:
                                                                return (128, 2, 2)
                                                            else:
                                                                return (64, 2, 4)
                                                        else:
                                                            return (128, 2, 2)
                                            else:
                                                return 'hand'
                                        else:
                                            if f['num_tokens'] <= 24:
                                                if f['kv_bits'] <= 12:
                                                    return 'hand'
                                                else:
                                                    if f['group'] <= 6:
                                                        return 'hand'
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return 'hand'
                                                        else:
                                                            return (64, 2, 4)
                                            else:
                                                if f['max_seqlen_q'] <= 1:
                                                    if f['block_size'] <= 40:
                                                        return 'hand'
                                                    else:
                                                        if f['kv_bits'] <= 12:
                                                            return 'hand'
                                                        else:
                                                            if f['num_seqs'] <= 96:
                                                                return 'hand'
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return (128, 2, 2)
                                                                else:
                                                                    return 'hand'
                                                else:
                                                    return 'hand'
                                else:
                                    if f['kv_bits'] <= 12:
                                        if f['max_seqlen_q'] <= 6:
                                            if f['num_tokens'] <= 192:
                                                if f['num_seqs'] <= 96:
                                                    return (128, 2, 1)
                                                else:
                                                    if f['max_seqlen_k'] <= 1280:
                                                        if f['block_size'] <= 40:
                                                            return (128, 2, 1)
                                                        else:
                                                            if f['group'] <= 2:
                                                                return (64, 2, 1)
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return (128, 2, 0)
                                                                else:
                                                                    return (128, 2, 1)
                                                    else:
                                                        return (128, 2, 1)
                                            else:
                                                if f['group'] <= 6:
                                                    if f['max_seqlen_q'] <= 3:
                                                        if f['block_size'] <= 40:
                                                            return (128, 2, 1)
                                                        else:
                                                            if f['max_seqlen_k'] <= 1280:
                                                                if f['group'] <= 2:
                                                                    return (128, 2, 1)
                                                                else:
                                                                    return (64, 2, 1)
                                                            else:
                                                                return (128, 2, 1)
                                                    else:
                                                        return (128, 2, 1)
                                                else:
                                                    if f['max_seqlen_q'] <= 3:
                                                        return (128, 2, 1)
                                                    else:
                                                        if f['max_seqlen_k'] <= 1280:
                                                            if f['block_size'] <= 40:
                                                                return (128, 2, 1)
                                                            else:
                                                                return (64, 2, 1)
                                                        else:
                                                            return (128, 3, 1)
                                        else:
                                            if f['group'] <= 2:
                                                return (128, 2, 1)
                                            else:
                                                if f['max_seqlen_k'] <= 1280:
                                                    if f['block_size'] <= 40:
                                                        if f['num_kv_heads'] <= 1:
                                                            if f['group'] <= 6:
                                                                return (128, 2, 1)
                                                            else:
                                                                return (64, 2, 1)
                                                        else:
                                                            return (128, 2, 1)
                                                    else:
                                                        return (64, 2, 1)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (128, 3, 1)
                                                    else:
                                                        if f['group'] <= 6:
                                                            if f['num_seqs'] <= 40:
                                                                return (128, 2, 1)
                                                            else:
                                                                return (128, 3, 1)
                                                        else:
                                                            return (128, 2, 1)
                                    else:
                                        if f['block_size'] <= 40:
                                            if f['max_seqlen_k'] <= 3072:
                                                if f['max_seqlen_q'] <= 3:
                                                    return (128, 3, 0)
                                                else:
                                                    if f['max_seqlen_k'] <= 1280:
                                                        if f['group'] <= 2:
                                                            return (128, 3, 0)
                                                        else:
                                                            if f['max_seqlen_q'] <= 6:
                                                                if f['group'] <= 6:
                                                                    return (128, 3, 0)
                                                                else:
                                                                    return (128, 2, 0)
                                                            else:
                                                                return (128, 2, 0)
                                                    else:
                                                        if f['num_kv_heads'] <= 1:
                                                            if f['group'] <= 2:
                                                                if f['num_tokens'] <= 768:
                                                                    return (128, 2, 1)
                                                                else:
                                                                    return (128, 3, 0)
                                                            else:
                                                                return (128, 3, 0)
                                                        else:
                                                            return (128, 3, 0)
                                            else:
                                                return (128, 2, 1)
                                        else:
                                            if f['max_seqlen_k'] <= 1280:
                                                if f['num_tokens'] <= 192:
                                                    if f['max_seqlen_q'] <= 3:
                                                        if f['group'] <= 6:
                                                            return (128, 3, 0)
                                                        else:
                                                            if f['max_seqlen_q'] <= 1:
                                                                return (128, 3, 0)
                                                            else:
                                                                if f['num_tokens'] <= 80:
                                                                    return (128, 3, 0)
                                                                else:
                                                                    return (128, 2, 0)
                                                    else:
                                                        if f['group'] <= 2:
                                                            return (128, 3, 0)
                                                        else:
                                                            if f['group'] <= 6:
                                                                if f['num_tokens'] <= 96:
                                                                    return (128, 3, 0)
                                                                else:
                                                                    return (128, 2, 0)
                                                            else:
                                                                return (128, 2, 0)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['max_seqlen_q'] <= 6:
                                                            return (128, 3, 0)
                                                        else:
                                                            return (128, 2, 0)
                                                    else:
                                                        return (128, 2, 0)
                                            else:
                                                return (128, 3, 0)
                else:
                    if f['programs'] <= 48:
                        if f['max_seqlen_k'] <= 20480:
                            if f['programs'] <= 6:
                                if f['head_dim'] <= 96:
                                    if f['programs'] <= 3:
                                        if f['max_seqlen_q'] <= 1:
                                            if f['num_tokens'] <= 1:
                                                if f['group'] <= 2:
                                                    if f['kv_bits'] <= 12:
                                                        return (128, 2, 1)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (128, 2, 1)
                                                        else:
                                                            return 'hand'
                                                else:
                                                    return (128, 2, 1)
                                            else:
                                                if f['block_size'] <= 40:
                                                    return (128, 2, 1)
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        if f['group'] <= 2:
                                                            return (128, 2, 1)
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (128, 2, 8)
                                                            else:
                                                                return (128, 2, 1)
                                                    else:
                                                        if f['group'] <= 2:
                                                            return 'hand'
                                                        else:
                                                            return (128, 2, 1)
                                        else:
                                            if f['num_tokens'] <= 12:
                                                if f['group'] <= 6:
                                                    return (128, 2, 1)
                                                else:
                                                    if f['num_tokens'] <= 6:
                                                        return (128, 2, 1)
                                                    else:
                                                        if f['kv_bits'] <= 12:
                                                            return (128, 2, 1)
                                                        else:
                                                            if f['programs'] <= 1:
                                                                return (128, 2, 1)
                                                            else:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    if f['block_size'] <= 40:
                                                                        return (128, 2, 1)
                                                                    else:
                                                                        return 'hand'
                                                                else:
                                                                    if f['block_size'] <= 40:
                                                                        return 'hand'
                                                                    else:
                                                                        return (128, 2, 1)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    return (128, 2, 1)
                                                else:
                                                    if f['group'] <= 2:
                                                        return (128, 2, 1)
                                                    else:
                                                        return 'hand'
                                    else:
                                        if f['kv_bits'] <= 12:
                                            if f['max_seqlen_q'] <= 3:
                                                if f['block_size'] <= 40:
                                                    return (128, 2, 2)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (128, 2, 2)
                                                    else:
                                                        if f['max_seqlen_q'] <= 1:
                                                            return (128, 2, 2)
                                                        else:
                                                            return (64, 2, 2)
                                            else:
                                                if f['group'] <= 2:
                                                    if f['block_size'] <= 40:
                                                        return (128, 2, 2)
                                                    else:
                                                        if f['num_tokens'] <= 12:
                                                            return (64, 2, 2)
                                                        else:
                                                            if f['num_tokens'] <= 24:
                                                                return (128, 2, 2)
                                                            else:
                                                                return (64, 2, 2)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['num_tokens'] <= 12:
                                                                return (128, 2, 2)
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return (128, 2, 2)
                                                                else:
                                                                    return (64, 2, 2)
                                                        else:
                                                            return (64, 2, 2)
                                                    else:
                                                        return (64, 2, 2)
                                        else:
                                            if f['num_tokens'] <= 3:
                                                if f['group'] <= 6:
                                                    if f['block_size'] <= 40:
                                                        if f['group'] <= 2:
                                                            return (128, 2, 2)
                                                        else:
                                                            return (128, 2, 8)
                                                    else:
                                                        return (128, 2, 2)
                                                else:
                                                    return 'hand'
                                            else:
                                                if f['max_seqlen_q'] <= 1:
                                                    if f['group'] <= 6:
                                                        return (128, 2, 2)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return 'hand'
                                                        else:
                                                            return (64, 2, 8)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['max_seqlen_q'] <= 6:
                                                            return (128, 2, 2)
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        if f['num_tokens'] <= 6:
                                                            if f['group'] <= 6:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 2, 2)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            if f['num_seqs'] <= 3:
                                                                if f['group'] <= 6:
                                                                    if f['block_size'] <= 40:
                                                                        if f['num_tokens'] <= 12:
                                                                            return 'hand'
                                                                        else:
                                                                            return (32, 2, 2)
                                                                    else:
                                                                        return 'hand'
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                return 'hand'
                                else:
                                    if f['num_tokens'] <= 1:
                                        if f['group'] <= 2:
                                            if f['block_size'] <= 40:
                                                if f['num_kv_heads'] <= 1:
                                                    return (128, 2, 1)
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        return (128, 2, 8)
                                                    else:
                                                        return (32, 2, 1)
                                            else:
                                                return 'hand'
                                        else:
                                            if f['num_kv_heads'] <= 1:
                                                if f['block_size'] <= 40:
                                                    if f['kv_bits'] <= 12:
                                                        if f['group'] <= 6:
                                                            return 'hand'
                                                        else:
                                                            return (128, 2, 1)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (128, 2, 1)
                                                        else:
                                                            return 'hand'
                                                else:
                                                    return 'hand'
                                            else:
                                                return 'hand'
                                    else:
                                        if f['num_tokens'] <= 12:
                                            if f['num_seqs'] <= 3:
                                                if f['max_seqlen_q'] <= 1:
                                                    if f['num_kv_heads'] <= 1:
                                                        if f['group'] <= 2:
                                                            if f['kv_bits'] <= 12:
                                                                return 'hand'
                                                            else:
                                                                return (32, 2, 1)
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            if f['group'] <= 6:
                                                                return 'hand'
                                                            else:
                                                                if f['kv_bits'] <= 12:
                                                                    return 'hand'
                                                                else:
                                                                    return (32, 2, 2)
                                                        else:
                                                            if f['group'] <= 6:
                                                                return 'hand'
                                                            else:
                                                                if f['kv_bits'] <= 12:
                                                                    return 'hand'
                                                                else:
                                                                    return (32, 2, 2)
                                                else:
                                                    return 'hand'
                                            else:
                                                if f['group'] <= 6:
                                                    return 'hand'
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        return 'hand'
                                                    else:
                                                        if f['num_tokens'] <= 6:
                                                            return (32, 2, 2)
                                                        else:
                                                            return 'hand'
                                        else:
                                            if f['num_kv_heads'] <= 1:
                                                return 'hand'
                                            else:
                                                if f['block_size'] <= 40:
                                                    if f['kv_bits'] <= 12:
                                                        if f['group'] <= 2:
                                                            return 'hand'
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (32, 2, 4)
                                                            else:
                                                                return 'hand'
                                                    else:
                                                        return 'hand'
                                                else:
                                                    return 'hand'
                            else:
                                if f['num_tokens'] <= 1:
                                    if f['block_size'] <= 40:
                                        if f['head_dim'] <= 96:
                                            if f['kv_bits'] <= 12:
                                                return (32, 2, 4)
                                            else:
                                                return 'hand'
                                        else:
                                            if f['kv_bits'] <= 12:
                                                if f['group'] <= 2:
                                                    return (128, 2, 2)
                                                else:
                                                    return (64, 2, 2)
                                            else:
                                                return (32, 2, 4)
                                    else:
                                        if f['head_dim'] <= 96:
                                            if f['kv_bits'] <= 12:
                                                return (32, 2, 4)
                                            else:
                                                return 'hand'
                                        else:
                                            if f['kv_bits'] <= 12:
                                                if f['group'] <= 2:
                                                    return (128, 2, 2)
                                                else:
                                                    return (64, 2, 2)
                                            else:
                                                if f['group'] <= 6:
                                                    return (32, 2, 8)
                                                else:
                                                    return (32, 2, 4)
                                else:
                                    if f['head_dim'] <= 96:
                                        if f['kv_bits'] <= 12:
                                            if f['programs'] <= 24:
                                                if f['max_seqlen_q'] <= 1:
                                                    if f['group'] <= 6:
                                                        if f['group'] <= 2:
                                                            if f['programs'] <= 12:
                                                                return (128, 2, 2)
                                                            else:
                                                                return (64, 2, 4)
                                                        else:
                                                            return (128, 2, 2)
                                                    else:
                                                        if f['num_tokens'] <= 6:
                                                            if f['num_seqs'] <= 3:
                                                                if f['block_size'] <= 40:
                                                                    return (64, 2, 4)
                                                                else:
                                                                    return (128, 2, 2)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return 'hand'
                                                                else:
                                                                    return (64, 2, 4)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (64, 2, 4)
                                                            else:
                                                                if f['programs'] <= 12:
                                                                    return (64, 2, 4)
                                                                else:
                                                                    return (128, 2, 2)
                                                else:
                                                    if f['num_tokens'] <= 3:
                                                        if f['group'] <= 6:
                                                            return (32, 2, 4)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (64, 2, 4)
                                                            else:
                                                                return (128, 2, 2)
                                                    else:
                                                        if f['max_seqlen_q'] <= 3:
                                                            if f['group'] <= 6:
                                                                return (128, 2, 2)
                                                            else:
                                                                if f['programs'] <= 12:
                                                                    if f['block_size'] <= 40:
                                                                        return (64, 2, 4)
                                                                    else:
                                                                        return (128, 2, 2)
                                                                else:
                                                                    return (128, 2, 2)
                                                        else:
                                                            return (128, 2, 2)
                                            else:
                                                if f['block_size'] <= 40:
                                                    if f['group'] <= 6:
                                                        if f['group'] <= 2:
                                                            if f['num_tokens'] <= 6:
                                                                return (64, 3, 4)
                                                            else:
                                                                return (128, 3, 2)
                                                        else:
                                                            return (128, 3, 2)
                                                    else:
                                                        if f['num_tokens'] <= 48:
                                                            if f['num_seqs'] <= 10:
                                                                return (128, 3, 2)
                                                            else:
                                                                if f['num_tokens'] <= 24:
                                                                    return (64, 2, 4)
                                                                else:
                                                                    return (128, 3, 2)
                                                        else:
                                                            if f['max_seqlen_q'] <= 3:
                                                                return (128, 3, 2)
                                                            else:
                                                                if f['num_kv_heads'] <= 1:
                                                                    return (128, 2, 2)
                                                                else:
                                                                    if f['num_tokens'] <= 96:
                                                                        return (128, 2, 2)
                                                                    else:
                                                                        return (128, 3, 2)
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['group'] <= 6:
                                                            if f['num_kv_heads'] <= 1:
                                                                if f['group'] <= 2:
                                                                    return (128, 3, 2)
                                                                else:
                                                                    return (128, 2, 2)
                                                            else:
                                                                if f['group'] <= 2:
                                                                    return (64, 3, 4)
                                                                else:
                                                                    if f['num_tokens'] <= 10:
                                                                        return (64, 3, 4)
                                                                    else:
                                                                        return (128, 2, 2)
                                                        else:
                                                            return (64, 2, 4)
                                                    else:
                                                        if f['group'] <= 2:
                                                            if f['max_seqlen_q'] <= 3:
                                                                return (128, 3, 2)
                                                            else:
                                                                if f['num_tokens'] <= 24:
                                                                    return (128, 3, 2)
                                                                else:
                                                                    return (128, 2, 2)
                                                        else:
                                                            return (128, 2, 2)
                                        else:
                                            if f['max_seqlen_q'] <= 6:
                                                if f['num_seqs'] <= 24:
                                                    if f['programs'] <= 12:
                                                        if f['max_seqlen_q'] <= 1:
                                                            if f['group'] <= 2:
                                                                if f['block_size'] <= 40:
                                                                    if f['num_kv_heads'] <= 1:
                                                                        return (64, 2, 8)
                                                                    else:
                                                                        return 'hand'
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            if f['group'] <= 6:
                                                                return 'hand'
                                                            else:
                                                                if f['max_seqlen_q'] <= 3:
                                                                    return 'hand'
                                                                else:
                                                                    return (128, 2, 2)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return 'hand'
                                                        else:
                                                            if f['max_seqlen_q'] <= 3:
                                                                return 'hand'
                                                            else:
                                                                return (128, 2, 2)
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['group'] <= 2:
                                                            if f['block_size'] <= 40:
                                                                return (128, 2, 4)
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        if f['group'] <= 6:
                                                            return 'hand'
                                                        else:
                                                            if f['max_seqlen_q'] <= 3:
                                                                return 'hand'
                                                            else:
                                                                return (128, 2, 2)
                                            else:
                                                if f['group'] <= 2:
                                                    return 'hand'
                                                else:
                                                    if f['programs'] <= 24:
                                                        return (128, 2, 2)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            if f['group'] <= 6:
                                                                return (128, 3, 2)
                                                            else:
                                                                if f['num_kv_heads'] <= 1:
                                                                    return 'hand'
                                                                else:
                                                                    if f['num_kv_heads'] <= 5:
                                                                        return (128, 3, 2)
                                                                    else:
                                                                        return (128, 2, 2)
                                                        else:
                                                            return (128, 2, 2)
                                    else:
                                        if f['programs'] <= 12:
                                            if f['kv_bits'] <= 12:
                                                if f['num_tokens'] <= 3:
                                                    if f['group'] <= 2:
                                                        if f['block_size'] <= 40:
                                                            return (128, 2, 2)
                                                        else:
                                                            return (64, 2, 2)
                                                    else:
                                                        return (64, 2, 2)
                                                else:
                                                    if f['num_seqs'] <= 2:
                                                        if f['group'] <= 6:
                                                            return (64, 2, 2)
                                                        else:
                                                            if f['num_tokens'] <= 6:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 2, 2)
                                                                else:
                                                                    return (64, 2, 2)
                                                            else:
                                                                return (128, 2, 2)
                                                    else:
                                                        if f['group'] <= 2:
                                                            if f['max_seqlen_q'] <= 1:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 2, 2)
                                                                else:
                                                                    if f['num_kv_heads'] <= 1:
                                                                        return (128, 2, 2)
                                                                    else:
                                                                        return (64, 2, 2)
                                                            else:
                                                                return (64, 2, 2)
                                                        else:
                                                            return (64, 2, 2)
                                            else:
                                                if f['max_seqlen_q'] <= 3:
                                                    return (32, 2, 4)
                                                else:
                                                    if f['group'] <= 2:
                                                        return (32, 2, 4)
                                                    else:
                                                        if f['group'] <= 6:
                                                            if f['max_seqlen_q'] <= 6:
                                                                return (32, 2, 4)
                                                            else:
                                                                return (64, 2, 2)
                                                        else:
                                                            return (64, 2, 2)
                                        else:
                                            if f['programs'] <= 24:
                                                if f['kv_bits'] <= 12:
                                                    if f['num_tokens'] <= 12:
                                                        if f['group'] <= 6:
                                                            if f['max_seqlen_q'] <= 3:
                                                                if f['group'] <= 2:
                                                                    return (128, 2, 2)
                                                                else:
                                                                    if f['num_tokens'] <= 3:
                                                                        return (64, 3, 2)
                                                                    else:
                                                                        if f['max_seqlen_q'] <= 1:
                                                                            if f['block_size'] <= 40:
                                                                                return (128, 2, 2)
                                                                            else:
                                                                                return (64, 3, 2)
                                                                        else:
                                                                            return (128, 2, 2)
                                                            else:
                                                                if f['group'] <= 2:
                                                                    return (64, 3, 2)
                                                                else:
                                                                    return (128, 2, 2)
                                                        else:
                                                            return (128, 2, 2)
                                                    else:
                                                        return (128, 2, 2)
                                                else:
                                                    if f['group'] <= 6:
                                                        if f['max_seqlen_q'] <= 3:
                                                            return (32, 2, 4)
                                                        else:
                                                            if f['group'] <= 2:
                                                                return (32, 2, 4)
                                                            else:
                                                                return (128, 2, 2)
                                                    else:
                                                        if f['max_seqlen_q'] <= 1:
                                                            if f['block_size'] <= 40:
                                                                if f['num_seqs'] <= 5:
                                                                    return (32, 2, 4)
                                                                else:
                                                                    return (128, 2, 2)
                                                            else:
                                                                return (32, 2, 4)
                                                        else:
                                                            return (128, 2, 2)
                                            else:
                                                if f['max_seqlen_q'] <= 6:
                                                    return (128, 2, 2)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (128, 2, 2)
                                                    else:
                                                        if f['kv_bits'] <= 12:
                                                            return (128, 2, 2)
                                                        else:
                                                            return 'hand'
                        else:
                            if f['programs'] <= 12:
                                if f['max_seqlen_k'] <= 81920:
                                    if f['num_tokens'] <= 3:
                                        if f['kv_bits'] <= 12:
                                            if f['programs'] <= 6:
                                                if f['group'] <= 2:
                                                    if f['num_kv_heads'] <= 1:
                                                        if f['head_dim'] <= 96:
                                                            if f['num_seqs'] <= 1:
                                                                if f['num_tokens'] <= 1:
                                                                    if f['block_size'] <= 40:
                                                                        return (128, 2, 1)
                                                                    else:
                                                                        return (128, 3, 2)
                                                                else:
                                                                    return (128, 3, 2)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 2, 8)
                                                                else:
                                                                    return (128, 2, 1)
                                                        else:
                                                            return (128, 2, 1)
                                                    else:
                                                        if f['max_seqlen_q'] <= 1:
                                                            if f['head_dim'] <= 96:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 2, 2)
                                                                else:
                                                                    if f['num_seqs'] <= 1:
                                                                        return (128, 2, 1)
                                                                    else:
                                                                        return (128, 2, 2)
                                                            else:
                                                                if f['num_tokens'] <= 1:
                                                                    return (128, 2, 1)
                                                                else:
                                                                    return (128, 2, 2)
                                                        else:
                                                            if f['head_dim'] <= 96:
                                                                return (128, 3, 2)
                                                            else:
                                                                return (128, 2, 1)
                                                else:
                                                    if f['programs'] <= 1:
                                                        if f['block_size'] <= 40:
                                                            if f['num_tokens'] <= 1:
                                                                if f['group'] <= 6:
                                                                    if f['head_dim'] <= 96:
                                                                        return (128, 3, 2)
                                                                    else:
                                                                        return (128, 2, 1)
                                                                else:
                                                                    if f['head_dim'] <= 96:
                                                                        return (128, 2, 1)
                                                                    else:
                                                                        return (128, 2, 2)
                                                            else:
                                                                if f['group'] <= 6:
                                                                    if f['head_dim'] <= 96:
                                                                        return (128, 3, 2)
                                                                    else:
                                                                        return (128, 2, 1)
                                                                else:
                                                                    return (128, 2, 1)
                                                        else:
                                                            if f['head_dim'] <= 96:
                                                                return (128, 3, 2)
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return (128, 2, 1)
                                                                else:
                                                                    if f['max_seqlen_q'] <= 1:
                                                                        return (128, 2, 4)
                                                                    else:
                                                                        return (128, 2, 1)
                                                    else:
                                                        if f['programs'] <= 3:
                                                            if f['block_size'] <= 40:
                                                                return (128, 2, 1)
                                                            else:
                                                                if f['num_tokens'] <= 1:
                                                                    if f['head_dim'] <= 96:
                                                                        if f['group'] <= 6:
                                                                            return (128, 3, 2)
                                                                        else:
                                                                            return (128, 2, 1)
                                                                    else:
                                                                        return (128, 2, 1)
                                                                else:
                                                                    return (128, 2, 1)
                                                        else:
                                                            return (128, 2, 2)
                                            else:
                                                if f['head_dim'] <= 96:
                                                    return (64, 3, 4)
                                                else:
                                                    return (128, 2, 2)
                                        else:
                                            if f['block_size'] <= 40:
                                                if f['num_tokens'] <= 1:
                                                    if f['head_dim'] <= 96:
                                                        if f['programs'] <= 5:
                                                            if f['group'] <= 6:
                                                                return (128, 3, 1)
                                                            else:
                                                                if f['num_kv_heads'] <= 1:
                                                                    return (128, 3, 1)
                                                                else:
                                                                    return (128, 2, 1)
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        if f['programs'] <= 1:
                                                            if f['group'] <= 6:
                                                                return (64, 3, 1)
                                                            else:
                                                                return (128, 3, 1)
                                                        else:
                                                            if f['group'] <= 2:
                                                                if f['programs'] <= 5:
                                                                    return (128, 3, 1)
                                                                else:
                                                                    return (32, 2, 4)
                                                            else:
                                                                return (128, 3, 1)
                                                else:
                                                    if f['programs'] <= 3:
                                                        if f['head_dim'] <= 96:
                                                            if f['group'] <= 6:
                                                                if f['programs'] <= 1:
                                                                    return (128, 3, 1)
                                                                else:
                                                                    if f['group'] <= 2:
                                                                        if f['num_seqs'] <= 1:
                                                                            return (128, 3, 1)
                                                                        else:
                                                                            return (128, 2, 1)
                                                                    else:
                                                                        if f['num_seqs'] <= 1:
                                                                            return (128, 2, 1)
                                                                        else:
                                                                            return (128, 3, 1)
                                                            else:
                                                                return (128, 2, 1)
                                                        else:
                                                            if f['programs'] <= 1:
                                                                return (64, 3, 1)
                                                            else:
                                                                return (128, 3, 1)
                                                    else:
                                                        if f['num_seqs'] <= 1:
                                                            if f['head_dim'] <= 96:
                                                                return 'hand'
                                                            else:
                                                                if f['group'] <= 2:
                                                                    return (32, 2, 4)
                                                                else:
                                                                    return (128, 3, 1)
                                                        else:
                                                            return (128, 2, 2)
                                            else:
                                                if f['programs'] <= 1:
                                                    if f['head_dim'] <= 96:
                                                        if f['max_seqlen_q'] <= 1:
                                                            if f['group'] <= 2:
                                                                return (128, 3, 1)
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return (128, 3, 2)
                                                                else:
                                                                    return (128, 3, 1)
                                                        else:
                                                            return (128, 3, 1)
                                                    else:
                                                        if f['max_seqlen_q'] <= 1:
                                                            if f['group'] <= 6:
                                                                if f['group'] <= 2:
                                                                    return (64, 3, 1)
                                                                else:
                                                                    return (64, 3, 8)
                                                            else:
                                                                return (128, 3, 1)
                                                        else:
                                                            return (64, 3, 1)
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['group'] <= 6:
                                                            if f['num_kv_heads'] <= 5:
                                                                if f['num_kv_heads'] <= 1:
                                                                    if f['head_dim'] <= 96:
                                                                        if f['group'] <= 2:
                                                                            return (64, 3, 2)
                                                                        else:
                                                                            return (128, 3, 1)
                                                                    else:
                                                                        return (128, 3, 1)
                                                                else:
                                                                    if f['num_tokens'] <= 1:
                                                                        if f['head_dim'] <= 96:
                                                                            if f['group'] <= 2:
                                                                                return (64, 3, 1)
                                                                            else:
                                                                                return (128, 3, 1)
                                                                        else:
                                                                            return (128, 3, 1)
                                                                    else:
                                                                        if f['group'] <= 2:
                                                                            if f['head_dim'] <= 96:
                                                                                return (128, 2, 2)
                                                                            else:
                                                                                return 'hand'
                                                                        else:
                                                                            return (128, 2, 2)
                                                            else:
                                                                if f['head_dim'] <= 96:
                                                                    return 'hand'
                                                                else:
                                                                    if f['group'] <= 2:
                                                                        return (32, 2, 4)
                                                                    else:
                                                                        return (64, 3, 2)
                                                        else:
                                                            if f['programs'] <= 3:
                                                                if f['num_tokens'] <= 1:
                                                                    return (128, 3, 1)
                                                                else:
                                                                    if f['head_dim'] <= 96:
                                                                        return (128, 2, 1)
                                                                    else:
                                                                        return (128, 3, 1)
                                                            else:
                                                                if f['num_tokens'] <= 1:
                                                                    if f['head_dim'] <= 96:
                                                                        return 'hand'
                                                                    else:
                                                                        return (32, 2, 4)
                                                                else:
                                                                    return (128, 2, 2)
                                                    else:
                                                        if f['num_kv_heads'] <= 5:
                                                            if f['head_dim'] <= 96:
                                                                if f['group'] <= 2:
                                                                    return (128, 3, 1)
                                                                else:
                                                                    return (128, 2, 1)
                                                            else:
                                                                return (128, 3, 1)
                                                        else:
                                                            if f['head_dim'] <= 96:
                                                                return 'hand'
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return (32, 2, 4)
                                                                else:
                                                                    return (128, 2, 2)
                                    else:
                                        if f['programs'] <= 3:
                                            if f['head_dim'] <= 96:
                                                if f['kv_bits'] <= 12:
                                                    if f['max_seqlen_q'] <= 3:
                                                        if f['group'] <= 2:
                                                            if f['block_size'] <= 40:
                                                                return (128, 3, 8)
                                                            else:
                                                                return (128, 3, 2)
                                                        else:
                                                            return (128, 2, 1)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            if f['group'] <= 2:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    return (128, 3, 2)
                                                                else:
                                                                    if f['programs'] <= 1:
                                                                        return (128, 3, 2)
                                                                    else:
                                                                        return (128, 2, 1)
                                                            else:
                                                                if f['num_tokens'] <= 12:
                                                                    return (128, 2, 1)
                                                                else:
                                                                    if f['group'] <= 6:
                                                                        return (128, 3, 2)
                                                                    else:
                                                                        return (128, 2, 1)
                                                        else:
                                                            if f['num_tokens'] <= 6:
                                                                if f['num_kv_heads'] <= 1:
                                                                    return (128, 3, 2)
                                                                else:
                                                                    if f['group'] <= 2:
                                                                        return (128, 3, 2)
                                                                    else:
                                                                        if f['group'] <= 6:
                                                                            return (128, 2, 1)
                                                                        else:
                                                                            return (128, 3, 2)
                                                            else:
                                                                return (128, 3, 2)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['num_tokens'] <= 12:
                                                            if f['max_seqlen_q'] <= 6:
                                                                return (128, 3, 1)
                                                            else:
                                                                if f['programs'] <= 1:
                                                                    return (128, 3, 1)
                                                                else:
                                                                    if f['block_size'] <= 40:
                                                                        return (128, 2, 1)
                                                                    else:
                                                                        return (128, 3, 1)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (128, 2, 1)
                                                            else:
                                                                return (64, 3, 1)
                                                    else:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['programs'] <= 1:
                                                                if f['group'] <= 6:
                                                                    return (128, 3, 1)
                                                                else:
                                                                    return (128, 2, 1)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 2, 1)
                                                                else:
                                                                    if f['group'] <= 6:
                                                                        return (128, 2, 1)
                                                                    else:
                                                                        if f['max_seqlen_q'] <= 3:
                                                                            return (128, 2, 1)
                                                                        else:
                                                                            return (64, 3, 1)
                                                        else:
                                                            if f['programs'] <= 1:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 2, 1)
                                                                else:
                                                                    return (128, 3, 1)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    if f['group'] <= 6:
                                                                        return (128, 3, 1)
                                                                    else:
                                                                        if f['num_seqs'] <= 1:
                                                                            return 'hand'
                                                                        else:
                                                                            return (64, 3, 1)
                                                                else:
                                                                    return (64, 3, 1)
                                            else:
                                                if f['num_tokens'] <= 12:
                                                    if f['programs'] <= 1:
                                                        if f['kv_bits'] <= 12:
                                                            if f['block_size'] <= 40:
                                                                return (128, 2, 1)
                                                            else:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    return (128, 2, 1)
                                                                else:
                                                                    if f['group'] <= 2:
                                                                        return (128, 2, 1)
                                                                    else:
                                                                        return 'hand'
                                                        else:
                                                            if f['group'] <= 6:
                                                                if f['block_size'] <= 40:
                                                                    if f['group'] <= 2:
                                                                        return (64, 3, 1)
                                                                    else:
                                                                        if f['max_seqlen_q'] <= 6:
                                                                            return (64, 3, 1)
                                                                        else:
                                                                            return (128, 2, 1)
                                                                else:
                                                                    return (64, 3, 1)
                                                            else:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    return (128, 2, 1)
                                                                else:
                                                                    return 'hand'
                                                    else:
                                                        if f['max_seqlen_q'] <= 3:
                                                            if f['kv_bits'] <= 12:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 2, 1)
                                                                else:
                                                                    return (64, 3, 1)
                                                            else:
                                                                return (128, 3, 1)
                                                        else:
                                                            return 'hand'
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return 'hand'
                                                    else:
                                                        if f['kv_bits'] <= 12:
                                                            if f['group'] <= 2:
                                                                return 'hand'
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return (64, 2, 1)
                                                                else:
                                                                    return 'hand'
                                                        else:
                                                            return 'hand'
                                        else:
                                            if f['head_dim'] <= 96:
                                                if f['programs'] <= 6:
                                                    if f['max_seqlen_q'] <= 6:
                                                        if f['group'] <= 2:
                                                            if f['block_size'] <= 40:
                                                                if f['kv_bits'] <= 12:
                                                                    if f['max_seqlen_q'] <= 3:
                                                                        if f['max_seqlen_q'] <= 1:
                                                                            return (128, 2, 2)
                                                                        else:
                                                                            return (128, 3, 2)
                                                                    else:
                                                                        return (128, 2, 2)
                                                                else:
                                                                    return (128, 2, 2)
                                                            else:
                                                                return (128, 2, 2)
                                                        else:
                                                            return (128, 2, 2)
                                                    else:
                                                        if f['group'] <= 2:
                                                            return (128, 2, 2)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                if f['kv_bits'] <= 12:
                                                                    return (128, 2, 2)
                                                                else:
                                                                    if f['group'] <= 6:
                                                                        return (128, 2, 2)
                                                                    else:
                                                                        return (128, 3, 2)
                                                            else:
                                                                if f['kv_bits'] <= 12:
                                                                    if f['group'] <= 6:
                                                                        return (128, 3, 2)
                                                                    else:
                                                                        return (128, 2, 2)
                                                                else:
                                                                    if f['num_kv_heads'] <= 1:
                                                                        if f['group'] <= 6:
                                                                            return 'hand'
                                                                        else:
                                                                            return (128, 3, 2)
                                                                    else:
                                                                        return (64, 3, 2)
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        if f['block_size'] <= 40:
                                                            if f['num_tokens'] <= 6:
                                                                if f['num_kv_heads'] <= 5:
                                                                    if f['group'] <= 2:
                                                                        return (64, 3, 4)
                                                                    else:
                                                                        if f['group'] <= 6:
                                                                            return (64, 3, 8)
                                                                        else:
                                                                            return (64, 3, 4)
                                                                else:
                                                                    return (64, 3, 4)
                                                            else:
                                                                if f['num_kv_heads'] <= 1:
                                                                    if f['group'] <= 6:
                                                                        return (128, 3, 2)
                                                                    else:
                                                                        if f['num_tokens'] <= 48:
                                                                            return (128, 2, 2)
                                                                        else:
                                                                            return (128, 3, 2)
                                                                else:
                                                                    if f['max_seqlen_q'] <= 6:
                                                                        return (64, 3, 4)
                                                                    else:
                                                                        if f['group'] <= 6:
                                                                            return (128, 3, 2)
                                                                        else:
                                                                            if f['num_seqs'] <= 2:
                                                                                return (64, 3, 4)
                                                                            else:
                                                                                return (128, 3, 2)
                                                        else:
                                                            if f['num_tokens'] <= 48:
                                                                if f['num_tokens'] <= 12:
                                                                    if f['num_tokens'] <= 6:
                                                                        if f['group'] <= 6:
                                                                            return (64, 3, 4)
                                                                        else:
                                                                            if f['max_seqlen_q'] <= 2:
                                                                                return (64, 2, 4)
                                                                            else:
                                                                                return (64, 3, 4)
                                                                    else:
                                                                        if f['group'] <= 2:
                                                                            if f['num_kv_heads'] <= 5:
                                                                                return (64, 3, 4)
                                                                            else:
                                                                                return (64, 2, 4)
                                                                        else:
                                                                            if f['num_kv_heads'] <= 5:
                                                                                if f['num_seqs'] <= 6:
                                                                                    return (64, 2, 4)
                                                                                else:
                                                                                    if f['group'] <= 6:
                                                                                        return (128, 3, 2)
                                                                                    else:
                                                                                        return (64, 2, 4)
                                                                            else:
                                                                                if f['group'] <= 6:
                                                                                    return (128, 3, 2)
                                                                                else:
                                                                                    return (64, 3, 4)
                                                                else:
                                                                    if f['group'] <= 2:
                                                                        if f['num_tokens'] <= 24:
                                                                            if f['max_seqlen_q'] <= 3:
                                                                                return (64, 2, 4)
                                                                            else:
                                                                                return (64, 3, 4)
                                                                        else:
                                                                            return (64, 2, 4)
                                                                    else:
                                                                        return (64, 2, 4)
                                                            else:
                                                                if f['group'] <= 2:
                                                                    return 'hand'
                                                                else:
                                                                    return (64, 2, 4)
                                                    else:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['num_seqs'] <= 2:
                                                                if f['group'] <= 6:
                                                                    return 'hand'
                                                                else:
                                                                    if f['block_size'] <= 40:
                                                                        return (128, 2, 2)
                                                                    else:
                                                                        return (128, 3, 2)
                                                            else:
                                                                if f['num_tokens'] <= 24:
                                                                    return 'hand'
                                                                else:
                                                                    if f['group'] <= 6:
                                                                        return 'hand'
                                                                    else:
                                                                        if f['block_size'] <= 40:
                                                                            return (128, 2, 2)
                                                                        else:
                                                                            return 'hand'
                                                        else:
                                                            if f['group'] <= 2:
                                                                return 'hand'
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return (128, 2, 2)
                                                                else:
                                                                    if f['block_size'] <= 40:
                                                                        return (128, 2, 2)
                                                                    else:
                                                                        if f['num_seqs'] <= 2:
                                                                            return (128, 3, 2)
                                                                        else:
                                                                            if f['num_seqs'] <= 6:
                                                                                return (64, 3, 4)
                                                                            else:
                                                                                return (128, 3, 2)
                                            else:
                                                if f['max_seqlen_q'] <= 1:
                                                    if f['kv_bits'] <= 12:
                                                        if f['programs'] <= 6:
                                                            if f['group'] <= 6:
                                                                return (128, 2, 2)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 2, 8)
                                                                else:
                                                                    return (128, 2, 2)
                                                        else:
                                                            return (128, 2, 2)
                                                    else:
                                                        if f['programs'] <= 6:
                                                            if f['group'] <= 6:
                                                                return (128, 2, 2)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 3, 1)
                                                                else:
                                                                    return (128, 2, 2)
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (32, 2, 4)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 2, 2)
                                                                else:
                                                                    return (32, 2, 4)
                                                else:
                                                    if f['programs'] <= 6:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['group'] <= 6:
                                                                if f['num_seqs'] <= 3:
                                                                    if f['block_size'] <= 40:
                                                                        return (128, 2, 2)
                                                                    else:
                                                                        if f['kv_bits'] <= 12:
                                                                            return (128, 2, 2)
                                                                        else:
                                                                            if f['num_tokens'] <= 6:
                                                                                if f['group'] <= 2:
                                                                                    return 'hand'
                                                                                else:
                                                                                    return (128, 2, 2)
                                                                            else:
                                                                                if f['group'] <= 2:
                                                                                    return (128, 2, 2)
                                                                                else:
                                                                                    return 'hand'
                                                                else:
                                                                    return (128, 2, 2)
                                                            else:
                                                                if f['max_seqlen_q'] <= 3:
                                                                    return (128, 2, 2)
                                                                else:
                                                                    return 'hand'
                                                        else:
                                                            if f['group'] <= 2:
                                                                if f['kv_bits'] <= 12:
                                                                    if f['block_size'] <= 40:
                                                                        if f['num_tokens'] <= 24:
                                                                            return 'hand'
                                                                        else:
                                                                            return (128, 2, 2)
                                                                    else:
                                                                        return 'hand'
                                                                else:
                                                                    return (128, 2, 2)
                                                            else:
                                                                return 'hand'
                                                    else:
                                                        if f['kv_bits'] <= 12:
                                                            return (128, 2, 2)
                                                        else:
                                                            if f['group'] <= 2:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    return (32, 2, 4)
                                                                else:
                                                                    return (128, 2, 2)
                                                            else:
                                                                if f['group'] <= 6:
                                                                    if f['max_seqlen_q'] <= 3:
                                                                        if f['block_size'] <= 40:
                                                                            return (128, 2, 2)
                                                                        else:
                                                                            return (32, 2, 4)
                                                                    else:
                                                                        return (128, 2, 2)
                                                                else:
                                                                    if f['num_seqs'] <= 2:
                                                                        if f['max_seqlen_q'] <= 6:
                                                                            if f['block_size'] <= 40:
                                                                                return (128, 3, 1)
                                                                            else:
                                                                                return (128, 2, 2)
                                                                        else:
                                                                            return (128, 3, 1)
                                                                    else:
                                                                        if f['max_seqlen_q'] <= 6:
                                                                            return (128, 2, 2)
                                                                        else:
                                                                            if f['block_size'] <= 40:
                                                                                return 'hand'
                                                                            else:
                                                                                return (128, 2, 2)
                                else:
                                    if f['programs'] <= 3:
                                        if f['kv_bits'] <= 12:
                                            if f['head_dim'] <= 96:
                                                return (128, 3, 2)
                                            else:
                                                return (128, 3, 1)
                                        else:
                                            if f['num_tokens'] <= 1:
                                                if f['head_dim'] <= 96:
                                                    return (128, 3, 1)
                                                else:
                                                    if f['num_kv_heads'] <= 1:
                                                        return (128, 3, 1)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            if f['group'] <= 2:
                                                                return (128, 3, 1)
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return (128, 3, 8)
                                                                else:
                                                                    return (128, 3, 1)
                                                        else:
                                                            return (128, 3, 1)
                                            else:
                                                return (128, 3, 1)
                                    else:
                                        if f['head_dim'] <= 96:
                                            if f['programs'] <= 6:
                                                if f['num_tokens'] <= 3:
                                                    if f['block_size'] <= 40:
                                                        if f['group'] <= 6:
                                                            if f['kv_bits'] <= 12:
                                                                return (128, 3, 2)
                                                            else:
                                                                if f['group'] <= 2:
                                                                    return (128, 3, 2)
                                                                else:
                                                                    return (128, 3, 4)
                                                        else:
                                                            if f['kv_bits'] <= 12:
                                                                return (128, 2, 4)
                                                            else:
                                                                return (128, 3, 2)
                                                    else:
                                                        if f['group'] <= 2:
                                                            if f['kv_bits'] <= 12:
                                                                return (128, 3, 2)
                                                            else:
                                                                return (128, 2, 2)
                                                        else:
                                                            return (128, 3, 2)
                                                else:
                                                    if f['num_tokens'] <= 12:
                                                        if f['kv_bits'] <= 12:
                                                            if f['block_size'] <= 40:
                                                                if f['group'] <= 2:
                                                                    return (128, 3, 2)
                                                                else:
                                                                    if f['num_kv_heads'] <= 1:
                                                                        if f['group'] <= 6:
                                                                            return (128, 3, 2)
                                                                        else:
                                                                            return (128, 2, 2)
                                                                    else:
                                                                        if f['num_tokens'] <= 6:
                                                                            return (128, 2, 2)
                                                                        else:
                                                                            if f['group'] <= 6:
                                                                                return (128, 2, 2)
                                                                            else:
                                                                                return (128, 3, 2)
                                                            else:
                                                                return (128, 3, 2)
                                                        else:
                                                            if f['max_seqlen_q'] <= 1:
                                                                if f['group'] <= 2:
                                                                    if f['block_size'] <= 40:
                                                                        return (128, 3, 2)
                                                                    else:
                                                                        return (128, 2, 2)
                                                                else:
                                                                    return (128, 3, 2)
                                                            else:
                                                                return (128, 3, 2)
                                                    else:
                                                        return (128, 3, 2)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    if f['num_tokens'] <= 3:
                                                        return (64, 3, 4)
                                                    else:
                                                        if f['max_seqlen_q'] <= 1:
                                                            if f['group'] <= 2:
                                                                if f['block_size'] <= 40:
                                                                    return (64, 3, 4)
                                                                else:
                                                                    if f['num_tokens'] <= 6:
                                                                        return (64, 3, 8)
                                                                    else:
                                                                        return (64, 3, 4)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    if f['num_seqs'] <= 6:
                                                                        return (64, 3, 4)
                                                                    else:
                                                                        if f['group'] <= 6:
                                                                            return (64, 3, 4)
                                                                        else:
                                                                            return (128, 3, 4)
                                                                else:
                                                                    return (64, 3, 4)
                                                        else:
                                                            if f['group'] <= 2:
                                                                if f['max_seqlen_q'] <= 3:
                                                                    if f['num_kv_heads'] <= 1:
                                                                        if f['block_size'] <= 40:
                                                                            return (128, 3, 8)
                                                                        else:
                                                                            return (64, 3, 4)
                                                                    else:
                                                                        return (64, 3, 4)
                                                                else:
                                                                    if f['num_tokens'] <= 48:
                                                                        if f['block_size'] <= 40:
                                                                            if f['max_seqlen_q'] <= 6:
                                                                                if f['num_seqs'] <= 6:
                                                                                    return (64, 3, 4)
                                                                                else:
                                                                                    return (128, 3, 4)
                                                                            else:
                                                                                return (128, 3, 4)
                                                                        else:
                                                                            return (64, 3, 4)
                                                                    else:
                                                                        return (128, 3, 4)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 3, 4)
                                                                else:
                                                                    if f['group'] <= 6:
                                                                        if f['max_seqlen_q'] <= 3:
                                                                            return (64, 3, 4)
                                                                        else:
                                                                            if f['num_tokens'] <= 6:
                                                                                return (64, 3, 4)
                                                                            else:
                                                                                return (128, 3, 4)
                                                                    else:
                                                                        return (128, 3, 4)
                                                else:
                                                    if f['group'] <= 6:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['block_size'] <= 40:
                                                                if f['num_kv_heads'] <= 5:
                                                                    if f['group'] <= 2:
                                                                        return 'hand'
                                                                    else:
                                                                        if f['num_seqs'] <= 6:
                                                                            return (64, 3, 4)
                                                                        else:
                                                                            if f['num_tokens'] <= 12:
                                                                                return 'hand'
                                                                            else:
                                                                                if f['max_seqlen_q'] <= 3:
                                                                                    return (64, 3, 4)
                                                                                else:
                                                                                    return 'hand'
                                                                else:
                                                                    if f['group'] <= 2:
                                                                        if f['max_seqlen_q'] <= 3:
                                                                            return (128, 3, 2)
                                                                        else:
                                                                            return 'hand'
                                                                    else:
                                                                        if f['num_tokens'] <= 3:
                                                                            return 'hand'
                                                                        else:
                                                                            return (128, 3, 2)
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            if f['group'] <= 2:
                                                                if f['block_size'] <= 40:
                                                                    if f['num_kv_heads'] <= 1:
                                                                        return 'hand'
                                                                    else:
                                                                        if f['num_seqs'] <= 2:
                                                                            return (128, 3, 2)
                                                                        else:
                                                                            return (64, 3, 4)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                return (128, 3, 2)
                                                    else:
                                                        if f['num_tokens'] <= 3:
                                                            return 'hand'
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                if f['max_seqlen_q'] <= 3:
                                                                    if f['max_seqlen_q'] <= 1:
                                                                        return (64, 3, 4)
                                                                    else:
                                                                        return 'hand'
                                                                else:
                                                                    if f['num_tokens'] <= 24:
                                                                        return (128, 3, 2)
                                                                    else:
                                                                        if f['max_seqlen_q'] <= 6:
                                                                            return (128, 3, 2)
                                                                        else:
                                                                            return (64, 3, 4)
                                                            else:
                                                                if f['num_tokens'] <= 6:
                                                                    return (128, 3, 2)
                                                                else:
                                                                    if f['max_seqlen_q'] <= 3:
                                                                        return 'hand'
                                                                    else:
                                                                        return (128, 3, 2)
                                        else:
                                            if f['kv_bits'] <= 12:
                                                if f['programs'] <= 6:
                                                    if f['group'] <= 2:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['max_seqlen_q'] <= 3:
                                                                return (128, 3, 1)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 3, 1)
                                                                else:
                                                                    return (128, 3, 2)
                                                        else:
                                                            if f['num_seqs'] <= 3:
                                                                return (128, 2, 2)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 3, 1)
                                                                else:
                                                                    return (128, 2, 2)
                                                    else:
                                                        if f['max_seqlen_q'] <= 3:
                                                            return (128, 2, 2)
                                                        else:
                                                            if f['group'] <= 6:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    return (128, 2, 2)
                                                                else:
                                                                    return (128, 3, 2)
                                                            else:
                                                                return (128, 3, 2)
                                                else:
                                                    return (128, 3, 2)
                                            else:
                                                if f['num_tokens'] <= 3:
                                                    if f['num_kv_heads'] <= 5:
                                                        if f['block_size'] <= 40:
                                                            if f['group'] <= 6:
                                                                return (128, 3, 1)
                                                            else:
                                                                return (128, 2, 2)
                                                        else:
                                                            return (128, 2, 2)
                                                    else:
                                                        if f['group'] <= 2:
                                                            if f['num_tokens'] <= 1:
                                                                return (32, 2, 4)
                                                            else:
                                                                return (128, 2, 4)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                if f['group'] <= 6:
                                                                    if f['max_seqlen_q'] <= 1:
                                                                        return (32, 2, 4)
                                                                    else:
                                                                        return (128, 2, 4)
                                                                else:
                                                                    return (128, 2, 2)
                                                            else:
                                                                return (128, 2, 2)
                                                else:
                                                    if f['programs'] <= 6:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['group'] <= 2:
                                                                if f['block_size'] <= 40:
                                                                    if f['max_seqlen_q'] <= 3:
                                                                        return (128, 3, 1)
                                                                    else:
                                                                        return (128, 2, 2)
                                                                else:
                                                                    return (128, 2, 2)
                                                            else:
                                                                return (128, 2, 2)
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (128, 2, 2)
                                                            else:
                                                                return 'hand'
                                                    else:
                                                        if f['group'] <= 2:
                                                            if f['block_size'] <= 40:
                                                                if f['num_kv_heads'] <= 1:
                                                                    if f['max_seqlen_q'] <= 3:
                                                                        if f['max_seqlen_q'] <= 1:
                                                                            return (128, 2, 4)
                                                                        else:
                                                                            return (32, 2, 4)
                                                                    else:
                                                                        return (128, 2, 4)
                                                                else:
                                                                    return (128, 2, 4)
                                                            else:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    if f['num_kv_heads'] <= 5:
                                                                        return (32, 2, 4)
                                                                    else:
                                                                        return (128, 2, 4)
                                                                else:
                                                                    return (128, 2, 2)
                                                        else:
                                                            if f['max_seqlen_q'] <= 1:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 2, 4)
                                                                else:
                                                                    if f['group'] <= 6:
                                                                        return (128, 2, 4)
                                                                    else:
                                                                        return (128, 2, 2)
                                                            else:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    if f['max_seqlen_q'] <= 3:
                                                                        if f['block_size'] <= 40:
                                                                            if f['group'] <= 6:
                                                                                return (128, 2, 4)
                                                                            else:
                                                                                return (128, 2, 2)
                                                                        else:
                                                                            return (128, 2, 2)
                                                                    else:
                                                                        return (128, 2, 2)
                                                                else:
                                                                    if f['group'] <= 6:
                                                                        return (128, 2, 2)
                                                                    else:
                                                                        return 'hand'
                            else:
                                if f['kv_bits'] <= 12:
                                    if f['head_dim'] <= 96:
                                        if f['max_seqlen_k'] <= 81920:
                                            if f['programs'] <= 24:
                                                if f['num_tokens'] <= 48:
                                                    if f['num_tokens'] <= 12:
                                                        return (64, 3, 4)
                                                    else:
                                                        if f['group'] <= 2:
                                                            return (64, 3, 4)
                                                        else:
                                                            if f['max_seqlen_q'] <= 3:
                                                                if f['block_size'] <= 40:
                                                                    if f['num_seqs'] <= 12:
                                                                        return (64, 3, 4)
                                                                    else:
                                                                        if f['group'] <= 6:
                                                                            return (128, 3, 4)
                                                                        else:
                                                                            if f['max_seqlen_q'] <= 1:
                                                                                return (128, 3, 2)
                                                                            else:
                                                                                return (64, 3, 4)
                                                                else:
                                                                    return (64, 3, 4)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    if f['num_kv_heads'] <= 5:
                                                                        if f['group'] <= 6:
                                                                            return (64, 3, 4)
                                                                        else:
                                                                            return (128, 3, 2)
                                                                    else:
                                                                        if f['group'] <= 6:
                                                                            return (128, 3, 4)
                                                                        else:
                                                                            return (64, 3, 4)
                                                                else:
                                                                    return (128, 3, 2)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['block_size'] <= 40:
                                                            if f['num_kv_heads'] <= 1:
                                                                return (128, 3, 4)
                                                            else:
                                                                return (128, 3, 2)
                                                        else:
                                                            if f['max_seqlen_q'] <= 6:
                                                                return (64, 3, 4)
                                                            else:
                                                                return (64, 2, 4)
                                                    else:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['block_size'] <= 40:
                                                                if f['group'] <= 6:
                                                                    return (128, 3, 4)
                                                                else:
                                                                    return (128, 3, 2)
                                                            else:
                                                                return (128, 3, 2)
                                                        else:
                                                            return (128, 3, 2)
                                            else:
                                                if f['max_seqlen_q'] <= 6:
                                                    if f['group'] <= 6:
                                                        return (128, 3, 8)
                                                    else:
                                                        if f['num_tokens'] <= 48:
                                                            if f['block_size'] <= 40:
                                                                if f['max_seqlen_q'] <= 1:
                                                                    return (128, 3, 8)
                                                                else:
                                                                    if f['max_seqlen_q'] <= 3:
                                                                        return (128, 2, 8)
                                                                    else:
                                                                        return (128, 3, 8)
                                                            else:
                                                                return (128, 3, 8)
                                                        else:
                                                            if f['max_seqlen_q'] <= 3:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 2, 8)
                                                                else:
                                                                    return (128, 3, 8)
                                                            else:
                                                                return (128, 3, 4)
                                                else:
                                                    if f['group'] <= 2:
                                                        return (128, 3, 8)
                                                    else:
                                                        if f['num_kv_heads'] <= 5:
                                                            return (128, 3, 4)
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (128, 3, 4)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 3, 4)
                                                                else:
                                                                    return (128, 3, 2)
                                        else:
                                            return (128, 3, 8)
                                    else:
                                        if f['programs'] <= 24:
                                            if f['max_seqlen_k'] <= 81920:
                                                if f['max_seqlen_q'] <= 1:
                                                    return (128, 3, 2)
                                                else:
                                                    if f['group'] <= 6:
                                                        if f['block_size'] <= 40:
                                                            return (128, 3, 2)
                                                        else:
                                                            if f['group'] <= 2:
                                                                if f['num_tokens'] <= 48:
                                                                    return (128, 3, 2)
                                                                else:
                                                                    if f['max_seqlen_q'] <= 6:
                                                                        return (128, 3, 2)
                                                                    else:
                                                                        return (128, 2, 2)
                                                            else:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    if f['num_seqs'] <= 12:
                                                                        return (128, 2, 2)
                                                                    else:
                                                                        if f['max_seqlen_q'] <= 3:
                                                                            return (128, 3, 2)
                                                                        else:
                                                                            return (128, 2, 2)
                                                                else:
                                                                    return (128, 3, 2)
                                                    else:
                                                        if f['max_seqlen_q'] <= 3:
                                                            return (128, 2, 2)
                                                        else:
                                                            if f['num_tokens'] <= 48:
                                                                if f['block_size'] <= 40:
                                                                    if f['num_tokens'] <= 24:
                                                                        return (128, 2, 2)
                                                                    else:
                                                                        return (128, 3, 2)
                                                                else:
                                                                    return (128, 3, 2)
                                                            else:
                                                                if f['num_tokens'] <= 96:
                                                                    return (128, 2, 2)
                                                                else:
                                                                    if f['block_size'] <= 40:
                                                                        return (128, 2, 2)
                                                                    else:
                                                                        return (128, 3, 2)
                                            else:
                                                return (128, 3, 4)
                                        else:
                                            if f['max_seqlen_k'] <= 81920:
                                                return (128, 3, 4)
                                            else:
                                                if f['max_seqlen_q'] <= 3:
                                                    return (128, 3, 8)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['num_tokens'] <= 192:
                                                            return (128, 2, 8)
                                                        else:
                                                            return (128, 3, 8)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            if f['group'] <= 6:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    return (128, 2, 8)
                                                                else:
                                                                    return (128, 3, 8)
                                                            else:
                                                                return (128, 3, 8)
                                                        else:
                                                            return (128, 3, 8)
                                else:
                                    if f['head_dim'] <= 96:
                                        if f['block_size'] <= 40:
                                            if f['num_tokens'] <= 24:
                                                if f['group'] <= 6:
                                                    if f['num_kv_heads'] <= 1:
                                                        if f['group'] <= 2:
                                                            if f['max_seqlen_k'] <= 81920:
                                                                return (128, 3, 2)
                                                            else:
                                                                return (128, 3, 8)
                                                        else:
                                                            if f['max_seqlen_k'] <= 81920:
                                                                return 'hand'
                                                            else:
                                                                return (128, 3, 2)
                                                    else:
                                                        if f['max_seqlen_q'] <= 3:
                                                            return (128, 3, 2)
                                                        else:
                                                            if f['max_seqlen_k'] <= 81920:
                                                                return (128, 3, 2)
                                                            else:
                                                                if f['group'] <= 2:
                                                                    return (128, 3, 2)
                                                                else:
                                                                    if f['max_seqlen_q'] <= 6:
                                                                        return (128, 3, 8)
                                                                    else:
                                                                        return (128, 3, 2)
                                                else:
                                                    if f['max_seqlen_k'] <= 81920:
                                                        if f['programs'] <= 24:
                                                            if f['max_seqlen_q'] <= 1:
                                                                if f['num_tokens'] <= 5:
                                                                    return (128, 3, 2)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                return (128, 3, 2)
                                                        else:
                                                            if f['num_tokens'] <= 6:
                                                                return (128, 3, 2)
                                                            else:
                                                                return (64, 3, 4)
                                                    else:
                                                        if f['max_seqlen_q'] <= 6:
                                                            return (128, 3, 8)
                                                        else:
                                                            return (128, 3, 4)
                                            else:
                                                if f['max_seqlen_k'] <= 81920:
                                                    if f['programs'] <= 24:
                                                        if f['group'] <= 2:
                                                            if f['max_seqlen_q'] <= 6:
                                                                if f['max_seqlen_q'] <= 3:
                                                                    return 'hand'
                                                                else:
                                                                    return (128, 3, 2)
                                                            else:
                                                                return (128, 2, 4)
                                                        else:
                                                            if f['max_seqlen_q'] <= 3:
                                                                if f['group'] <= 6:
                                                                    return (128, 3, 2)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                return (128, 3, 2)
                                                    else:
                                                        if f['group'] <= 2:
                                                            if f['num_tokens'] <= 96:
                                                                return (128, 3, 2)
                                                            else:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    return (128, 3, 2)
                                                                else:
                                                                    return (64, 3, 4)
                                                        else:
                                                            if f['num_tokens'] <= 48:
                                                                if f['group'] <= 6:
                                                                    if f['max_seqlen_q'] <= 5:
                                                                        return (128, 3, 2)
                                                                    else:
                                                                        return (64, 3, 4)
                                                                else:
                                                                    return (64, 3, 4)
                                                            else:
                                                                return (64, 3, 4)
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['group'] <= 6:
                                                            return (128, 3, 2)
                                                        else:
                                                            return (128, 3, 8)
                                                    else:
                                                        if f['group'] <= 6:
                                                            if f['group'] <= 2:
                                                                if f['num_kv_heads'] <= 1:
                                                                    return (128, 3, 8)
                                                                else:
                                                                    if f['max_seqlen_q'] <= 6:
                                                                        return (128, 3, 2)
                                                                    else:
                                                                        return (128, 3, 8)
                                                            else:
                                                                return (128, 3, 8)
                                                        else:
                                                            if f['programs'] <= 24:
                                                                if f['max_seqlen_q'] <= 3:
                                                                    return (128, 3, 8)
                                                                else:
                                                                    return (64, 3, 8)
                                                            else:
                                                                if f['num_tokens'] <= 96:
                                                                    return (128, 3, 8)
                                                                else:
                                                                    if f['num_kv_heads'] <= 1:
                                                                        return (128, 3, 8)
                                                                    else:
                                                                        return (64, 3, 4)
                                        else:
                                            if f['max_seqlen_k'] <= 81920:
                                                if f['max_seqlen_q'] <= 6:
                                                    if f['group'] <= 6:
                                                        return 'hand'
                                                    else:
                                                        if f['max_seqlen_q'] <= 3:
                                                            return 'hand'
                                                        else:
                                                            if f['programs'] <= 24:
                                                                return (128, 3, 2)
                                                            else:
                                                                return (128, 3, 4)
                                                else:
                                                    if f['programs'] <= 24:
                                                        if f['group'] <= 2:
                                                            return 'hand'
                                                        else:
                                                            return (128, 3, 2)
                                                    else:
                                                        if f['group'] <= 2:
                                                            return 'hand'
                                                        else:
                                                            return (128, 3, 4)
                                            else:
                                                if f['programs'] <= 24:
                                                    if f['group'] <= 2:
                                                        return 'hand'
                                                    else:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['num_kv_heads'] <= 5:
                                                                if f['num_tokens'] <= 48:
                                                                    if f['num_seqs'] <= 12:
                                                                        if f['group'] <= 6:
                                                                            if f['max_seqlen_q'] <= 1:
                                                                                return 'hand'
                                                                            else:
                                                                                if f['max_seqlen_q'] <= 3:
                                                                                    return (64, 3, 8)
                                                                                else:
                                                                                    return 'hand'
                                                                        else:
                                                                            if f['max_seqlen_q'] <= 1:
                                                                                return (64, 3, 8)
                                                                            else:
                                                                                if f['num_tokens'] <= 24:
                                                                                    return 'hand'
                                                                                else:
                                                                                    return (64, 3, 8)
                                                                    else:
                                                                        if f['group'] <= 6:
                                                                            return (64, 3, 8)
                                                                        else:
                                                                            if f['max_seqlen_q'] <= 1:
                                                                                return (64, 3, 8)
                                                                            else:
                                                                                return 'hand'
                                                                else:
                                                                    if f['group'] <= 6:
                                                                        return 'hand'
                                                                    else:
                                                                        return (128, 3, 4)
                                                            else:
                                                                if f['num_tokens'] <= 6:
                                                                    return 'hand'
                                                                else:
                                                                    if f['group'] <= 6:
                                                                        return 'hand'
                                                                    else:
                                                                        return (128, 3, 4)
                                                        else:
                                                            return (128, 3, 4)
                                                else:
                                                    return (128, 3, 8)
                                    else:
                                        if f['programs'] <= 24:
                                            if f['max_seqlen_k'] <= 81920:
                                                if f['group'] <= 2:
                                                    if f['max_seqlen_q'] <= 3:
                                                        return (32, 2, 4)
                                                    else:
                                                        if f['num_tokens'] <= 12:
                                                            if f['block_size'] <= 40:
                                                                return (32, 2, 4)
                                                            else:
                                                                return (128, 2, 2)
                                                        else:
                                                            return (128, 2, 2)
                                                else:
                                                    if f['max_seqlen_q'] <= 6:
                                                        return (128, 2, 2)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (128, 2, 2)
                                                        else:
                                                            return 'hand'
                                            else:
                                                if f['max_seqlen_q'] <= 1:
                                                    return (128, 2, 4)
                                                else:
                                                    if f['max_seqlen_q'] <= 3:
                                                        if f['block_size'] <= 40:
                                                            return (128, 2, 4)
                                                        else:
                                                            if f['num_tokens'] <= 10:
                                                                return (128, 2, 4)
                                                            else:
                                                                if f['num_kv_heads'] <= 1:
                                                                    return (128, 2, 4)
                                                                else:
                                                                    if f['group'] <= 2:
                                                                        return (128, 2, 4)
                                                                    else:
                                                                        if f['group'] <= 6:
                                                                            return (64, 3, 4)
                                                                        else:
                                                                            return (128, 2, 4)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (128, 2, 4)
                                                        else:
                                                            if f['max_seqlen_q'] <= 6:
                                                                return (128, 2, 4)
                                                            else:
                                                                return 'hand'
                                        else:
                                            if f['max_seqlen_k'] <= 81920:
                                                if f['block_size'] <= 40:
                                                    if f['max_seqlen_q'] <= 6:
                                                        return (128, 2, 4)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (128, 2, 4)
                                                        else:
                                                            return 'hand'
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        return (32, 2, 8)
                                                    else:
                                                        if f['group'] <= 2:
                                                            if f['num_seqs'] <= 10:
                                                                if f['num_tokens'] <= 12:
                                                                    return (32, 2, 8)
                                                                else:
                                                                    return (128, 2, 4)
                                                            else:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    return (32, 2, 8)
                                                                else:
                                                                    if f['num_seqs'] <= 24:
                                                                        return (128, 2, 4)
                                                                    else:
                                                                        return (32, 2, 8)
                                                        else:
                                                            if f['max_seqlen_q'] <= 6:
                                                                if f['num_tokens'] <= 48:
                                                                    if f['num_kv_heads'] <= 5:
                                                                        if f['group'] <= 6:
                                                                            return (32, 2, 8)
                                                                        else:
                                                                            return (128, 2, 4)
                                                                    else:
                                                                        return (128, 2, 4)
                                                                else:
                                                                    return (128, 2, 4)
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return (128, 2, 4)
                                                                else:
                                                                    return 'hand'
                                            else:
                                                if f['group'] <= 2:
                                                    return (128, 2, 8)
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['group'] <= 6:
                                                            if f['block_size'] <= 40:
                                                                return (128, 2, 8)
                                                            else:
                                                                if f['num_seqs'] <= 24:
                                                                    return (64, 3, 8)
                                                                else:
                                                                    return (128, 2, 8)
                                                        else:
                                                            return (128, 2, 8)
                                                    else:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['group'] <= 6:
                                                                if f['num_tokens'] <= 48:
                                                                    if f['block_size'] <= 40:
                                                                        return (128, 2, 8)
                                                                    else:
                                                                        if f['max_seqlen_q'] <= 3:
                                                                            return (64, 3, 8)
                                                                        else:
                                                                            return (128, 2, 8)
                                                                else:
                                                                    return (128, 2, 8)
                                                            else:
                                                                return (128, 2, 8)
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (128, 2, 8)
                                                            else:
                                                                return 'hand'
                    else:
                        if f['head_dim'] <= 96:
                            if f['programs'] <= 96:
                                if f['max_seqlen_k'] <= 20480:
                                    if f['num_tokens'] <= 12:
                                        if f['kv_bits'] <= 12:
                                            if f['group'] <= 6:
                                                if f['group'] <= 2:
                                                    if f['block_size'] <= 40:
                                                        return (128, 3, 2)
                                                    else:
                                                        return (128, 2, 8)
                                                else:
                                                    return 'hand'
                                            else:
                                                if f['block_size'] <= 40:
                                                    return (128, 2, 8)
                                                else:
                                                    return 'hand'
                                        else:
                                            if f['group'] <= 2:
                                                if f['block_size'] <= 40:
                                                    return (128, 2, 4)
                                                else:
                                                    return 'hand'
                                            else:
                                                return 'hand'
                                    else:
                                        if f['group'] <= 2:
                                            if f['max_seqlen_q'] <= 1:
                                                if f['kv_bits'] <= 12:
                                                    return (128, 3, 2)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return 'hand'
                                                    else:
                                                        return (64, 2, 4)
                                            else:
                                                if f['block_size'] <= 40:
                                                    if f['max_seqlen_q'] <= 3:
                                                        if f['kv_bits'] <= 12:
                                                            if f['num_kv_heads'] <= 1:
                                                                return 'hand'
                                                            else:
                                                                if f['num_kv_heads'] <= 5:
                                                                    return (128, 3, 2)
                                                                else:
                                                                    return 'hand'
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        return 'hand'
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        return 'hand'
                                                    else:
                                                        if f['num_kv_heads'] <= 5:
                                                            if f['max_seqlen_q'] <= 6:
                                                                return (64, 2, 4)
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            return 'hand'
                                        else:
                                            if f['max_seqlen_q'] <= 1:
                                                if f['block_size'] <= 40:
                                                    return 'hand'
                                                else:
                                                    if f['group'] <= 6:
                                                        if f['kv_bits'] <= 12:
                                                            return 'hand'
                                                        else:
                                                            return (64, 2, 4)
                                                    else:
                                                        return 'hand'
                                            else:
                                                return 'hand'
                                else:
                                    if f['max_seqlen_q'] <= 3:
                                        if f['max_seqlen_k'] <= 81920:
                                            if f['kv_bits'] <= 12:
                                                return (128, 3, 8)
                                            else:
                                                if f['block_size'] <= 40:
                                                    if f['num_kv_heads'] <= 1:
                                                        if f['group'] <= 6:
                                                            return 'hand'
                                                        else:
                                                            if f['max_seqlen_q'] <= 1:
                                                                return (64, 3, 4)
                                                            else:
                                                                return 'hand'
                                                    else:
                                                        return 'hand'
                                                else:
                                                    if f['group'] <= 6:
                                                        return (64, 2, 4)
                                                    else:
                                                        if f['max_seqlen_q'] <= 1:
                                                            return (64, 2, 4)
                                                        else:
                                                            return (64, 3, 4)
                                        else:
                                            if f['block_size'] <= 40:
                                                if f['kv_bits'] <= 12:
                                                    return (128, 3, 8)
                                                else:
                                                    if f['group'] <= 6:
                                                        if f['num_tokens'] <= 48:
                                                            if f['group'] <= 2:
                                                                if f['max_seqlen_q'] <= 1:
                                                                    return (128, 3, 8)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        if f['num_tokens'] <= 96:
                                                            return (128, 3, 8)
                                                        else:
                                                            return 'hand'
                                            else:
                                                return (128, 3, 8)
                                    else:
                                        if f['group'] <= 6:
                                            if f['kv_bits'] <= 12:
                                                if f['max_seqlen_k'] <= 81920:
                                                    return (128, 3, 8)
                                                else:
                                                    if f['group'] <= 2:
                                                        return (128, 3, 8)
                                                    else:
                                                        if f['max_seqlen_q'] <= 6:
                                                            return (128, 3, 8)
                                                        else:
                                                            return 'hand'
                                            else:
                                                if f['block_size'] <= 40:
                                                    return 'hand'
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['max_seqlen_k'] <= 81920:
                                                            return (64, 2, 4)
                                                        else:
                                                            return (128, 3, 8)
                                                    else:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['max_seqlen_k'] <= 81920:
                                                                return 'hand'
                                                            else:
                                                                return (128, 3, 8)
                                                        else:
                                                            return 'hand'
                                        else:
                                            return 'hand'
                            else:
                                if f['group'] <= 6:
                                    if f['max_seqlen_q'] <= 6:
                                        if f['max_seqlen_k'] <= 20480:
                                            if f['block_size'] <= 40:
                                                if f['max_seqlen_q'] <= 1:
                                                    if f['group'] <= 2:
                                                        if f['kv_bits'] <= 12:
                                                            return (128, 3, 2)
                                                        else:
                                                            if f['num_kv_heads'] <= 5:
                                                                return (128, 2, 2)
                                                            else:
                                                                return (128, 3, 2)
                                                    else:
                                                        return (128, 3, 2)
                                                else:
                                                    if f['num_seqs'] <= 40:
                                                        return (128, 3, 2)
                                                    else:
                                                        if f['kv_bits'] <= 12:
                                                            return (128, 3, 2)
                                                        else:
                                                            if f['group'] <= 2:
                                                                if f['max_seqlen_q'] <= 3:
                                                                    return (128, 2, 2)
                                                                else:
                                                                    return (128, 3, 2)
                                                            else:
                                                                return (128, 3, 2)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    if f['group'] <= 2:
                                                        return (128, 3, 2)
                                                    else:
                                                        if f['max_seqlen_q'] <= 1:
                                                            return (128, 3, 2)
                                                        else:
                                                            return (128, 3, 8)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['num_kv_heads'] <= 5:
                                                            return (64, 2, 4)
                                                        else:
                                                            if f['num_tokens'] <= 24:
                                                                return (64, 2, 4)
                                                            else:
                                                                return (128, 3, 2)
                                                    else:
                                                        if f['num_tokens'] <= 96:
                                                            if f['num_tokens'] <= 48:
                                                                return (128, 3, 2)
                                                            else:
                                                                if f['num_seqs'] <= 40:
                                                                    return 'hand'
                                                                else:
                                                                    return (64, 2, 4)
                                                        else:
                                                            return (128, 3, 2)
                                        else:
                                            if f['kv_bits'] <= 12:
                                                if f['group'] <= 2:
                                                    if f['num_tokens'] <= 24:
                                                        if f['block_size'] <= 40:
                                                            return (128, 3, 2)
                                                        else:
                                                            if f['max_seqlen_k'] <= 81920:
                                                                return (128, 3, 2)
                                                            else:
                                                                return (128, 3, 8)
                                                    else:
                                                        return (128, 3, 2)
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        return (128, 3, 2)
                                                    else:
                                                        if f['max_seqlen_k'] <= 81920:
                                                            if f['block_size'] <= 40:
                                                                if f['max_seqlen_q'] <= 3:
                                                                    return (128, 3, 8)
                                                                else:
                                                                    if f['num_kv_heads'] <= 5:
                                                                        return (128, 3, 2)
                                                                    else:
                                                                        return (128, 3, 8)
                                                            else:
                                                                return (128, 3, 8)
                                                        else:
                                                            if f['num_tokens'] <= 192:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 3, 2)
                                                                else:
                                                                    return (128, 3, 8)
                                                            else:
                                                                return (128, 3, 2)
                                            else:
                                                if f['max_seqlen_k'] <= 81920:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['num_kv_heads'] <= 1:
                                                            if f['block_size'] <= 40:
                                                                return (128, 3, 2)
                                                            else:
                                                                if f['group'] <= 2:
                                                                    return (64, 3, 4)
                                                                else:
                                                                    return (128, 3, 2)
                                                        else:
                                                            return (128, 3, 2)
                                                    else:
                                                        return (128, 3, 2)
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['block_size'] <= 40:
                                                            if f['group'] <= 2:
                                                                return (128, 3, 2)
                                                            else:
                                                                return (128, 3, 8)
                                                        else:
                                                            return (128, 3, 8)
                                                    else:
                                                        if f['num_tokens'] <= 48:
                                                            if f['group'] <= 2:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 3, 2)
                                                                else:
                                                                    return (128, 3, 8)
                                                            else:
                                                                return (128, 3, 2)
                                                        else:
                                                            if f['group'] <= 2:
                                                                if f['num_seqs'] <= 96:
                                                                    if f['num_kv_heads'] <= 5:
                                                                        return (128, 3, 2)
                                                                    else:
                                                                        if f['block_size'] <= 40:
                                                                            return (128, 3, 2)
                                                                        else:
                                                                            return (128, 3, 8)
                                                                else:
                                                                    if f['max_seqlen_q'] <= 3:
                                                                        if f['block_size'] <= 40:
                                                                            return (128, 3, 2)
                                                                        else:
                                                                            return (64, 3, 4)
                                                                    else:
                                                                        return (64, 3, 4)
                                                            else:
                                                                if f['num_tokens'] <= 192:
                                                                    if f['max_seqlen_q'] <= 3:
                                                                        if f['block_size'] <= 40:
                                                                            return (128, 3, 2)
                                                                        else:
                                                                            return (64, 3, 4)
                                                                    else:
                                                                        return (64, 3, 4)
                                                                else:
                                                                    return (64, 3, 4)
                                    else:
                                        if f['kv_bits'] <= 12:
                                            if f['block_size'] <= 40:
                                                if f['max_seqlen_k'] <= 20480:
                                                    if f['num_kv_heads'] <= 5:
                                                        return (128, 3, 2)
                                                    else:
                                                        if f['group'] <= 2:
                                                            return (128, 3, 2)
                                                        else:
                                                            return (128, 3, 1)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['max_seqlen_k'] <= 81920:
                                                            return (128, 3, 8)
                                                        else:
                                                            return (128, 3, 2)
                                                    else:
                                                        if f['num_kv_heads'] <= 5:
                                                            return (128, 3, 2)
                                                        else:
                                                            if f['max_seqlen_k'] <= 81920:
                                                                return (128, 3, 2)
                                                            else:
                                                                return (128, 3, 8)
                                            else:
                                                if f['max_seqlen_k'] <= 20480:
                                                    if f['group'] <= 2:
                                                        return (128, 3, 8)
                                                    else:
                                                        return (128, 3, 1)
                                                else:
                                                    if f['num_kv_heads'] <= 1:
                                                        if f['group'] <= 2:
                                                            if f['max_seqlen_k'] <= 81920:
                                                                return (128, 3, 8)
                                                            else:
                                                                return (128, 3, 2)
                                                        else:
                                                            return (128, 3, 8)
                                                    else:
                                                        return (128, 3, 8)
                                        else:
                                            if f['group'] <= 2:
                                                if f['max_seqlen_k'] <= 81920:
                                                    if f['block_size'] <= 40:
                                                        if f['max_seqlen_k'] <= 20480:
                                                            return (128, 3, 2)
                                                        else:
                                                            if f['num_seqs'] <= 40:
                                                                return (128, 3, 2)
                                                            else:
                                                                if f['num_tokens'] <= 768:
                                                                    return (64, 3, 4)
                                                                else:
                                                                    return (128, 3, 2)
                                                    else:
                                                        return (128, 3, 2)
                                                else:
                                                    return (64, 3, 4)
                                            else:
                                                return 'hand'
                                else:
                                    if f['kv_bits'] <= 12:
                                        if f['max_seqlen_q'] <= 3:
                                            return (128, 3, 8)
                                        else:
                                            if f['max_seqlen_k'] <= 20480:
                                                return (128, 3, 1)
                                            else:
                                                if f['num_tokens'] <= 768:
                                                    if f['max_seqlen_q'] <= 6:
                                                        return (128, 3, 8)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (128, 3, 8)
                                                        else:
                                                            if f['num_seqs'] <= 40:
                                                                return (128, 3, 8)
                                                            else:
                                                                if f['max_seqlen_k'] <= 81920:
                                                                    return (128, 3, 8)
                                                                else:
                                                                    return (128, 3, 1)
                                                else:
                                                    if f['max_seqlen_k'] <= 81920:
                                                        return (128, 3, 1)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (128, 3, 8)
                                                        else:
                                                            return (128, 3, 1)
                                    else:
                                        if f['max_seqlen_q'] <= 3:
                                            if f['block_size'] <= 40:
                                                if f['num_tokens'] <= 192:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['max_seqlen_k'] <= 20480:
                                                            return (128, 3, 2)
                                                        else:
                                                            return (64, 3, 4)
                                                    else:
                                                        return (128, 3, 2)
                                                else:
                                                    if f['max_seqlen_k'] <= 20480:
                                                        return (128, 3, 2)
                                                    else:
                                                        if f['max_seqlen_k'] <= 81920:
                                                            return (128, 2, 2)
                                                        else:
                                                            return (128, 3, 2)
                                            else:
                                                if f['max_seqlen_k'] <= 81920:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['max_seqlen_k'] <= 20480:
                                                            return (128, 3, 2)
                                                        else:
                                                            return (64, 3, 4)
                                                    else:
                                                        return (128, 3, 2)
                                                else:
                                                    return (64, 3, 4)
                                        else:
                                            return 'hand'
                        else:
                            if f['kv_bits'] <= 12:
                                return 'hand'
                            else:
                                if f['max_seqlen_k'] <= 20480:
                                    if f['programs'] <= 96:
                                        if f['max_seqlen_q'] <= 6:
                                            if f['num_tokens'] <= 12:
                                                if f['group'] <= 6:
                                                    if f['group'] <= 2:
                                                        return (64, 2, 2)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (64, 2, 2)
                                                        else:
                                                            return (64, 3, 1)
                                                else:
                                                    return (64, 2, 2)
                                            else:
                                                if f['max_seqlen_q'] <= 3:
                                                    return (64, 2, 2)
                                                else:
                                                    if f['group'] <= 6:
                                                        if f['num_seqs'] <= 20:
                                                            if f['group'] <= 2:
                                                                return (64, 2, 2)
                                                            else:
                                                                return (32, 2, 8)
                                                        else:
                                                            return (64, 2, 2)
                                                    else:
                                                        return 'hand'
                                        else:
                                            if f['group'] <= 2:
                                                if f['num_seqs'] <= 20:
                                                    return (32, 2, 8)
                                                else:
                                                    if f['num_kv_heads'] <= 1:
                                                        return 'hand'
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (64, 2, 2)
                                                        else:
                                                            return 'hand'
                                            else:
                                                return 'hand'
                                    else:
                                        if f['group'] <= 6:
                                            if f['num_tokens'] <= 24:
                                                if f['block_size'] <= 40:
                                                    return (128, 2, 1)
                                                else:
                                                    if f['group'] <= 2:
                                                        return (128, 2, 1)
                                                    else:
                                                        return (128, 3, 0)
                                            else:
                                                return (128, 2, 1)
                                        else:
                                            if f['max_seqlen_q'] <= 6:
                                                if f['block_size'] <= 40:
                                                    return (128, 2, 1)
                                                else:
                                                    if f['num_tokens'] <= 192:
                                                        if f['num_tokens'] <= 48:
                                                            if f['num_tokens'] <= 24:
                                                                return (128, 2, 1)
                                                            else:
                                                                return (128, 3, 0)
                                                        else:
                                                            return (128, 2, 1)
                                                    else:
                                                        if f['max_seqlen_q'] <= 3:
                                                            return (128, 3, 0)
                                                        else:
                                                            return 'hand'
                                            else:
                                                if f['block_size'] <= 40:
                                                    return (128, 3, 0)
                                                else:
                                                    return 'hand'
                                else:
                                    if f['programs'] <= 96:
                                        return 'hand'
                                    else:
                                        if f['group'] <= 2:
                                            if f['max_seqlen_q'] <= 3:
                                                if f['block_size'] <= 40:
                                                    if f['num_kv_heads'] <= 5:
                                                        if f['max_seqlen_q'] <= 1:
                                                            return (128, 2, 1)
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        return 'hand'
                                                else:
                                                    return 'hand'
                                            else:
                                                if f['block_size'] <= 40:
                                                    if f['num_tokens'] <= 96:
                                                        return 'hand'
                                                    else:
                                                        return (128, 2, 1)
                                                else:
                                                    return 'hand'
                                        else:
                                            if f['block_size'] <= 40:
                                                if f['max_seqlen_q'] <= 6:
                                                    return (128, 2, 1)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (128, 2, 1)
                                                    else:
                                                        return 'hand'
                                            else:
                                                if f['max_seqlen_q'] <= 6:
                                                    if f['max_seqlen_q'] <= 3:
                                                        return 'hand'
                                                    else:
                                                        if f['group'] <= 6:
                                                            return 'hand'
                                                        else:
                                                            return (128, 2, 1)
                                                else:
                                                    if f['num_kv_heads'] <= 1:
                                                        if f['group'] <= 6:
                                                            return (128, 2, 1)
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        return (64, 3, 1)
            else:
                if f['max_seqlen_k'] <= 5120:
                    if f['programs'] <= 6:
                        if f['programs'] <= 3:
                            if f['kv_bits'] <= 12:
                                if f['block_size'] <= 40:
                                    return 'hand'
                                else:
                                    if f['programs'] <= 1:
                                        return 'hand'
                                    else:
                                        if f['max_seqlen_q'] <= 1:
                                            if f['max_seqlen_k'] <= 1280:
                                                if f['num_tokens'] <= 1:
                                                    return 'hand'
                                                else:
                                                    if f['group'] <= 2:
                                                        return 'hand'
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (32, 2, 2)
                                                        else:
                                                            return 'hand'
                                            else:
                                                return 'hand'
                                        else:
                                            if f['max_seqlen_k'] <= 1280:
                                                return 'hand'
                                            else:
                                                if f['num_tokens'] <= 6:
                                                    if f['max_seqlen_q'] <= 3:
                                                        return 'hand'
                                                    else:
                                                        if f['group'] <= 2:
                                                            return 'hand'
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (32, 2, 4)
                                                            else:
                                                                return 'hand'
                                                else:
                                                    return 'hand'
                            else:
                                return 'hand'
                        else:
                            if f['max_seqlen_q'] <= 3:
                                if f['group'] <= 6:
                                    if f['max_seqlen_k'] <= 1280:
                                        if f['kv_bits'] <= 12:
                                            return 'hand'
                                        else:
                                            if f['group'] <= 2:
                                                return 'hand'
                                            else:
                                                if f['num_kv_heads'] <= 1:
                                                    if f['block_size'] <= 40:
                                                        if f['max_seqlen_q'] <= 1:
                                                            return (64, 2, 1)
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        return 'hand'
                                                else:
                                                    return 'hand'
                                    else:
                                        if f['num_tokens'] <= 3:
                                            if f['group'] <= 2:
                                                if f['kv_bits'] <= 12:
                                                    return 'hand'
                                                else:
                                                    return (64, 2, 1)
                                            else:
                                                return 'hand'
                                        else:
                                            if f['num_tokens'] <= 6:
                                                return 'hand'
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    if f['block_size'] <= 40:
                                                        return 'hand'
                                                    else:
                                                        if f['group'] <= 2:
                                                            return 'hand'
                                                        else:
                                                            return (64, 2, 1)
                                                else:
                                                    return 'hand'
                                else:
                                    if f['block_size'] <= 40:
                                        if f['num_seqs'] <= 3:
                                            return 'hand'
                                        else:
                                            if f['max_seqlen_k'] <= 1280:
                                                if f['kv_bits'] <= 12:
                                                    return 'hand'
                                                else:
                                                    return (64, 2, 1)
                                            else:
                                                return 'hand'
                                    else:
                                        if f['max_seqlen_k'] <= 1280:
                                            return 'hand'
                                        else:
                                            if f['kv_bits'] <= 12:
                                                if f['max_seqlen_q'] <= 1:
                                                    return (64, 2, 1)
                                                else:
                                                    return (32, 2, 1)
                                            else:
                                                if f['max_seqlen_q'] <= 1:
                                                    return 'hand'
                                                else:
                                                    if f['num_tokens'] <= 6:
                                                        return (32, 2, 1)
                                                    else:
                                                        return 'hand'
                            else:
                                if f['max_seqlen_k'] <= 1280:
                                    if f['group'] <= 6:
                                        if f['group'] <= 2:
                                            return 'hand'
                                        else:
                                            if f['kv_bits'] <= 12:
                                                return 'hand'
                                            else:
                                                if f['max_seqlen_q'] <= 6:
                                                    return 'hand'
                                                else:
                                                    return (64, 2, 1)
                                    else:
                                        if f['max_seqlen_q'] <= 6:
                                            return 'hand'
                                        else:
                                            if f['kv_bits'] <= 12:
                                                return 'hand'
                                            else:
                                                if f['num_kv_heads'] <= 1:
                                                    return (64, 2, 1)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (64, 2, 1)
                                                    else:
                                                        return (64, 2, 8)
                                else:
                                    if f['num_kv_heads'] <= 1:
                                        if f['block_size'] <= 40:
                                            if f['kv_bits'] <= 12:
                                                if f['group'] <= 2:
                                                    return 'hand'
                                                else:
                                                    if f['max_seqlen_q'] <= 6:
                                                        if f['group'] <= 6:
                                                            return 'hand'
                                                        else:
                                                            return (32, 2, 1)
                                                    else:
                                                        return (32, 2, 1)
                                            else:
                                                return 'hand'
                                        else:
                                            if f['group'] <= 2:
                                                if f['max_seqlen_q'] <= 6:
                                                    return 'hand'
                                                else:
                                                    return (32, 2, 1)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    return (32, 2, 1)
                                                else:
                                                    if f['group'] <= 6:
                                                        if f['max_seqlen_q'] <= 6:
                                                            return (32, 2, 1)
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        return (32, 2, 1)
                                    else:
                                        if f['kv_bits'] <= 12:
                                            if f['group'] <= 2:
                                                if f['num_tokens'] <= 12:
                                                    return 'hand'
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return 'hand'
                                                    else:
                                                        return (32, 2, 1)
                                            else:
                                                if f['num_tokens'] <= 12:
                                                    if f['block_size'] <= 40:
                                                        if f['group'] <= 6:
                                                            return 'hand'
                                                        else:
                                                            return (32, 2, 1)
                                                    else:
                                                        return (32, 2, 1)
                                                else:
                                                    return (32, 2, 1)
                                        else:
                                            if f['num_tokens'] <= 12:
                                                return (32, 2, 1)
                                            else:
                                                if f['block_size'] <= 40:
                                                    if f['group'] <= 6:
                                                        return 'hand'
                                                    else:
                                                        return (32, 2, 1)
                                                else:
                                                    return (32, 2, 1)
                    else:
                        if f['programs'] <= 48:
                            if f['max_seqlen_k'] <= 1280:
                                if f['programs'] <= 24:
                                    if f['programs'] <= 12:
                                        if f['num_seqs'] <= 6:
                                            return 'hand'
                                        else:
                                            if f['group'] <= 6:
                                                return 'hand'
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    if f['max_seqlen_q'] <= 3:
                                                        if f['max_seqlen_q'] <= 1:
                                                            return 'hand'
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return 'hand'
                                                            else:
                                                                return (64, 2, 1)
                                                    else:
                                                        return 'hand'
                                                else:
                                                    return 'hand'
                                    else:
                                        if f['kv_bits'] <= 12:
                                            if f['max_seqlen_q'] <= 1:
                                                if f['group'] <= 6:
                                                    if f['group'] <= 2:
                                                        return 'hand'
                                                    else:
                                                        return (32, 2, 1)
                                                else:
                                                    if f['num_kv_heads'] <= 1:
                                                        if f['block_size'] <= 40:
                                                            return (32, 2, 1)
                                                        else:
                                                            return (64, 2, 2)
                                                    else:
                                                        if f['num_kv_heads'] <= 5:
                                                            if f['block_size'] <= 40:
                                                                return (32, 2, 1)
                                                            else:
                                                                return (64, 2, 1)
                                                        else:
                                                            return (32, 2, 1)
                                            else:
                                                if f['max_seqlen_q'] <= 3:
                                                    if f['group'] <= 2:
                                                        if f['block_size'] <= 40:
                                                            return (32, 2, 1)
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        if f['num_kv_heads'] <= 1:
                                                            if f['block_size'] <= 40:
                                                                return (32, 2, 1)
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return (64, 2, 1)
                                                                else:
                                                                    return (32, 2, 1)
                                                        else:
                                                            return (32, 2, 1)
                                                else:
                                                    return (32, 2, 1)
                                        else:
                                            if f['max_seqlen_q'] <= 1:
                                                if f['group'] <= 6:
                                                    if f['num_tokens'] <= 5:
                                                        return (32, 2, 1)
                                                    else:
                                                        if f['group'] <= 2:
                                                            if f['block_size'] <= 40:
                                                                if f['num_seqs'] <= 12:
                                                                    return (32, 2, 1)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                return (32, 2, 1)
                                                        else:
                                                            return 'hand'
                                                else:
                                                    if f['num_kv_heads'] <= 1:
                                                        if f['block_size'] <= 40:
                                                            return 'hand'
                                                        else:
                                                            return (32, 2, 8)
                                                    else:
                                                        return 'hand'
                                            else:
                                                if f['num_tokens'] <= 12:
                                                    if f['group'] <= 2:
                                                        return (32, 2, 1)
                                                    else:
                                                        if f['group'] <= 6:
                                                            if f['block_size'] <= 40:
                                                                return (32, 2, 1)
                                                            else:
                                                                if f['max_seqlen_q'] <= 3:
                                                                    return 'hand'
                                                                else:
                                                                    return (32, 2, 1)
                                                        else:
                                                            if f['num_tokens'] <= 6:
                                                                return (32, 2, 1)
                                                            else:
                                                                return 'hand'
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['max_seqlen_q'] <= 3:
                                                            return (32, 2, 1)
                                                        else:
                                                            if f['num_kv_heads'] <= 5:
                                                                return 'hand'
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (32, 2, 1)
                                                                else:
                                                                    return 'hand'
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            if f['group'] <= 6:
                                                                if f['num_seqs'] <= 12:
                                                                    if f['max_seqlen_q'] <= 6:
                                                                        if f['num_tokens'] <= 24:
                                                                            return 'hand'
                                                                        else:
                                                                            return (32, 2, 1)
                                                                    else:
                                                                        return 'hand'
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            return 'hand'
                                else:
                                    return (32, 2, 2)
                            else:
                                if f['programs'] <= 24:
                                    if f['group'] <= 6:
                                        if f['num_seqs'] <= 12:
                                            if f['programs'] <= 12:
                                                return (32, 2, 2)
                                            else:
                                                if f['group'] <= 2:
                                                    if f['max_seqlen_q'] <= 6:
                                                        return (32, 2, 2)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (32, 2, 2)
                                                        else:
                                                            if f['kv_bits'] <= 12:
                                                                return (64, 2, 2)
                                                            else:
                                                                return (32, 2, 2)
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        if f['block_size'] <= 40:
                                                            if f['num_kv_heads'] <= 5:
                                                                if f['max_seqlen_q'] <= 3:
                                                                    if f['max_seqlen_q'] <= 1:
                                                                        return (32, 2, 2)
                                                                    else:
                                                                        return (64, 2, 2)
                                                                else:
                                                                    return (32, 2, 2)
                                                            else:
                                                                return (32, 2, 2)
                                                        else:
                                                            if f['num_tokens'] <= 3:
                                                                return (32, 2, 2)
                                                            else:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    return (64, 2, 2)
                                                                else:
                                                                    if f['num_seqs'] <= 5:
                                                                        return (32, 2, 2)
                                                                    else:
                                                                        return (64, 2, 2)
                                                    else:
                                                        return (32, 2, 2)
                                        else:
                                            if f['kv_bits'] <= 12:
                                                if f['group'] <= 2:
                                                    if f['max_seqlen_q'] <= 6:
                                                        return (32, 2, 2)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (32, 2, 2)
                                                        else:
                                                            return (64, 2, 2)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        if f['num_tokens'] <= 24:
                                                            return (32, 2, 2)
                                                        else:
                                                            if f['max_seqlen_q'] <= 6:
                                                                return (64, 2, 2)
                                                            else:
                                                                return (32, 2, 2)
                                                    else:
                                                        return (64, 2, 2)
                                            else:
                                                return (32, 2, 2)
                                    else:
                                        if f['kv_bits'] <= 12:
                                            if f['programs'] <= 12:
                                                return (32, 2, 2)
                                            else:
                                                if f['max_seqlen_q'] <= 6:
                                                    if f['num_seqs'] <= 5:
                                                        if f['num_tokens'] <= 6:
                                                            return (64, 2, 2)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (32, 2, 2)
                                                            else:
                                                                return (64, 2, 2)
                                                    else:
                                                        return (64, 2, 2)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (32, 2, 2)
                                                    else:
                                                        return (64, 2, 2)
                                        else:
                                            return (32, 2, 2)
                                else:
                                    if f['group'] <= 2:
                                        if f['max_seqlen_q'] <= 3:
                                            if f['kv_bits'] <= 12:
                                                if f['block_size'] <= 40:
                                                    return (32, 2, 2)
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['num_kv_heads'] <= 1:
                                                            return (32, 2, 2)
                                                        else:
                                                            if f['num_kv_heads'] <= 5:
                                                                return (64, 2, 2)
                                                            else:
                                                                return (32, 2, 2)
                                                    else:
                                                        return (64, 2, 2)
                                            else:
                                                return (64, 2, 2)
                                        else:
                                            return (64, 2, 2)
                                    else:
                                        return (64, 2, 2)
                        else:
                            if f['kv_bits'] <= 12:
                                if f['programs'] <= 96:
                                    if f['max_seqlen_k'] <= 1280:
                                        return 'hand'
                                    else:
                                        if f['max_seqlen_q'] <= 3:
                                            if f['group'] <= 2:
                                                return 'hand'
                                            else:
                                                if f['num_tokens'] <= 12:
                                                    if f['block_size'] <= 40:
                                                        if f['group'] <= 6:
                                                            return 'hand'
                                                        else:
                                                            return (64, 2, 4)
                                                    else:
                                                        return (64, 2, 4)
                                                else:
                                                    if f['num_tokens'] <= 96:
                                                        return (64, 2, 4)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (64, 2, 4)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (64, 2, 4)
                                                            else:
                                                                return (64, 2, 2)
                                        else:
                                            if f['num_kv_heads'] <= 1:
                                                if f['block_size'] <= 40:
                                                    if f['max_seqlen_q'] <= 6:
                                                        if f['group'] <= 2:
                                                            return 'hand'
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (64, 2, 2)
                                                            else:
                                                                return 'hand'
                                                    else:
                                                        return 'hand'
                                                else:
                                                    return 'hand'
                                            else:
                                                return 'hand'
                                else:
                                    if f['num_tokens'] <= 768:
                                        if f['group'] <= 2:
                                            if f['max_seqlen_k'] <= 1280:
                                                if f['max_seqlen_q'] <= 6:
                                                    return 'hand'
                                                else:
                                                    if f['num_kv_heads'] <= 5:
                                                        return 'hand'
                                                    else:
                                                        return (64, 2, 1)
                                            else:
                                                return (64, 2, 1)
                                        else:
                                            if f['max_seqlen_q'] <= 6:
                                                return (64, 2, 1)
                                            else:
                                                if f['group'] <= 6:
                                                    if f['num_kv_heads'] <= 5:
                                                        if f['max_seqlen_k'] <= 1280:
                                                            return 'hand'
                                                        else:
                                                            return (64, 2, 1)
                                                    else:
                                                        return (64, 2, 1)
                                                else:
                                                    if f['max_seqlen_k'] <= 1280:
                                                        if f['num_tokens'] <= 320:
                                                            return (64, 2, 1)
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        return 'hand'
                                    else:
                                        if f['group'] <= 6:
                                            if f['max_seqlen_k'] <= 1280:
                                                return 'hand'
                                            else:
                                                return (64, 2, 1)
                                        else:
                                            return 'hand'
                            else:
                                if f['programs'] <= 96:
                                    if f['group'] <= 2:
                                        return 'hand'
                                    else:
                                        if f['max_seqlen_k'] <= 1280:
                                            if f['block_size'] <= 40:
                                                if f['num_tokens'] <= 48:
                                                    if f['max_seqlen_q'] <= 3:
                                                        return (64, 3, 0)
                                                    else:
                                                        return 'hand'
                                                else:
                                                    if f['max_seqlen_q'] <= 3:
                                                        if f['max_seqlen_q'] <= 1:
                                                            if f['group'] <= 6:
                                                                return (64, 3, 0)
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            if f['group'] <= 6:
                                                                return 'hand'
                                                            else:
                                                                return (64, 3, 0)
                                                    else:
                                                        return 'hand'
                                            else:
                                                if f['max_seqlen_q'] <= 3:
                                                    return (64, 3, 0)
                                                else:
                                                    if f['num_kv_heads'] <= 1:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['group'] <= 6:
                                                                return (64, 3, 0)
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            if f['group'] <= 6:
                                                                return 'hand'
                                                            else:
                                                                return (64, 3, 0)
                                                    else:
                                                        if f['num_tokens'] <= 96:
                                                            if f['max_seqlen_q'] <= 6:
                                                                if f['group'] <= 6:
                                                                    return (64, 3, 0)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return 'hand'
                                                                else:
                                                                    return (64, 3, 0)
                                                        else:
                                                            return (64, 3, 0)
                                        else:
                                            if f['num_tokens'] <= 12:
                                                if f['block_size'] <= 40:
                                                    if f['group'] <= 6:
                                                        return (32, 2, 2)
                                                    else:
                                                        return (64, 2, 1)
                                                else:
                                                    return (64, 2, 1)
                                            else:
                                                if f['max_seqlen_q'] <= 6:
                                                    return (64, 2, 1)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (64, 2, 1)
                                                    else:
                                                        return 'hand'
                                else:
                                    if f['max_seqlen_k'] <= 1280:
                                        if f['group'] <= 2:
                                            if f['num_seqs'] <= 40:
                                                if f['block_size'] <= 40:
                                                    return 'hand'
                                                else:
                                                    if f['num_tokens'] <= 24:
                                                        return 'hand'
                                                    else:
                                                        return (64, 3, 0)
                                            else:
                                                return 'hand'
                                        else:
                                            if f['max_seqlen_q'] <= 6:
                                                if f['num_tokens'] <= 192:
                                                    return (64, 3, 0)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        if f['group'] <= 6:
                                                            if f['max_seqlen_q'] <= 3:
                                                                return (64, 3, 0)
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            if f['max_seqlen_q'] <= 3:
                                                                return 'hand'
                                                            else:
                                                                return (32, 2, 0)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (64, 3, 0)
                                                        else:
                                                            if f['max_seqlen_q'] <= 3:
                                                                return (64, 3, 0)
                                                            else:
                                                                return (64, 2, 0)
                                            else:
                                                if f['group'] <= 6:
                                                    return (64, 2, 0)
                                                else:
                                                    if f['num_seqs'] <= 40:
                                                        return (64, 2, 0)
                                                    else:
                                                        if f['num_kv_heads'] <= 1:
                                                            return (32, 2, 0)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (32, 2, 0)
                                                            else:
                                                                return (64, 2, 0)
                                    else:
                                        if f['num_tokens'] <= 192:
                                            return (64, 3, 0)
                                        else:
                                            if f['block_size'] <= 40:
                                                if f['group'] <= 2:
                                                    return (64, 3, 0)
                                                else:
                                                    if f['max_seqlen_q'] <= 3:
                                                        return (64, 3, 0)
                                                    else:
                                                        if f['num_tokens'] <= 384:
                                                            if f['group'] <= 6:
                                                                return (64, 3, 0)
                                                            else:
                                                                return (64, 2, 1)
                                                        else:
                                                            if f['group'] <= 6:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    return (64, 3, 0)
                                                                else:
                                                                    return (64, 2, 1)
                                                            else:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    return (64, 2, 1)
                                                                else:
                                                                    return (64, 3, 0)
                                            else:
                                                return (64, 3, 0)
                else:
                    if f['programs'] <= 24:
                        if f['programs'] <= 6:
                            if f['kv_bits'] <= 12:
                                if f['programs'] <= 3:
                                    if f['num_tokens'] <= 12:
                                        if f['group'] <= 2:
                                            if f['max_seqlen_k'] <= 81920:
                                                if f['max_seqlen_k'] <= 20480:
                                                    if f['max_seqlen_q'] <= 3:
                                                        if f['programs'] <= 1:
                                                            return (32, 2, 1)
                                                        else:
                                                            if f['max_seqlen_q'] <= 1:
                                                                return (64, 2, 4)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (32, 2, 1)
                                                                else:
                                                                    if f['num_tokens'] <= 3:
                                                                        return (32, 2, 1)
                                                                    else:
                                                                        return (64, 2, 4)
                                                    else:
                                                        if f['max_seqlen_q'] <= 6:
                                                            return (64, 2, 4)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                if f['programs'] <= 1:
                                                                    return (64, 2, 4)
                                                                else:
                                                                    return (32, 2, 1)
                                                            else:
                                                                return (64, 2, 4)
                                                else:
                                                    return (64, 2, 4)
                                            else:
                                                if f['programs'] <= 1:
                                                    if f['num_tokens'] <= 1:
                                                        if f['block_size'] <= 40:
                                                            return (64, 3, 1)
                                                        else:
                                                            return (64, 2, 4)
                                                    else:
                                                        return (64, 2, 4)
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        return (64, 2, 4)
                                                    else:
                                                        return (32, 2, 1)
                                        else:
                                            if f['num_tokens'] <= 6:
                                                return (64, 2, 4)
                                            else:
                                                if f['group'] <= 6:
                                                    return (64, 2, 4)
                                                else:
                                                    if f['max_seqlen_k'] <= 81920:
                                                        if f['num_kv_heads'] <= 1:
                                                            return (64, 2, 4)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                if f['max_seqlen_k'] <= 20480:
                                                                    return (32, 2, 1)
                                                                else:
                                                                    return (64, 2, 4)
                                                            else:
                                                                return (64, 2, 4)
                                                    else:
                                                        if f['programs'] <= 1:
                                                            return (64, 2, 4)
                                                        else:
                                                            if f['num_kv_heads'] <= 1:
                                                                if f['block_size'] <= 40:
                                                                    return (32, 2, 1)
                                                                else:
                                                                    return (64, 2, 4)
                                                            else:
                                                                return (32, 2, 1)
                                    else:
                                        if f['max_seqlen_k'] <= 81920:
                                            if f['group'] <= 6:
                                                if f['max_seqlen_k'] <= 20480:
                                                    if f['group'] <= 2:
                                                        if f['block_size'] <= 40:
                                                            return (32, 2, 1)
                                                        else:
                                                            return (64, 2, 4)
                                                    else:
                                                        return (64, 2, 4)
                                                else:
                                                    return (64, 2, 4)
                                            else:
                                                if f['max_seqlen_k'] <= 20480:
                                                    if f['block_size'] <= 40:
                                                        return (32, 2, 1)
                                                    else:
                                                        return (64, 2, 4)
                                                else:
                                                    return (32, 2, 1)
                                        else:
                                            return (32, 2, 1)
                                else:
                                    if f['max_seqlen_k'] <= 20480:
                                        if f['num_kv_heads'] <= 1:
                                            if f['num_tokens'] <= 6:
                                                if f['group'] <= 2:
                                                    return (32, 2, 2)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (64, 2, 4)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (64, 2, 2)
                                                        else:
                                                            return (64, 2, 4)
                                            else:
                                                if f['num_tokens'] <= 12:
                                                    if f['group'] <= 2:
                                                        return (32, 2, 2)
                                                    else:
                                                        return (64, 2, 4)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (64, 2, 4)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            if f['max_seqlen_q'] <= 6:
                                                                return (32, 2, 2)
                                                            else:
                                                                return (64, 2, 4)
                                                        else:
                                                            return (64, 2, 4)
                                        else:
                                            if f['num_tokens'] <= 3:
                                                if f['block_size'] <= 40:
                                                    return (32, 2, 2)
                                                else:
                                                    if f['group'] <= 6:
                                                        if f['group'] <= 2:
                                                            return (32, 2, 2)
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        return (64, 2, 4)
                                            else:
                                                return (32, 2, 2)
                                    else:
                                        if f['num_kv_heads'] <= 1:
                                            if f['group'] <= 2:
                                                if f['max_seqlen_k'] <= 81920:
                                                    return (64, 2, 4)
                                                else:
                                                    if f['num_tokens'] <= 12:
                                                        if f['max_seqlen_q'] <= 1:
                                                            return (32, 2, 2)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return 'hand'
                                                            else:
                                                                return (32, 2, 2)
                                                    else:
                                                        return (32, 2, 2)
                                            else:
                                                if f['max_seqlen_q'] <= 1:
                                                    if f['block_size'] <= 40:
                                                        if f['group'] <= 6:
                                                            return (64, 2, 4)
                                                        else:
                                                            if f['max_seqlen_k'] <= 81920:
                                                                return (64, 2, 8)
                                                            else:
                                                                return (64, 2, 4)
                                                    else:
                                                        return (64, 2, 4)
                                                else:
                                                    if f['max_seqlen_q'] <= 6:
                                                        return (64, 2, 4)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (64, 2, 4)
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (64, 2, 4)
                                                            else:
                                                                if f['max_seqlen_k'] <= 81920:
                                                                    return (64, 2, 4)
                                                                else:
                                                                    return (32, 2, 2)
                                        else:
                                            if f['max_seqlen_k'] <= 81920:
                                                return (64, 2, 4)
                                            else:
                                                if f['group'] <= 2:
                                                    if f['max_seqlen_q'] <= 6:
                                                        return (32, 2, 2)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (32, 2, 2)
                                                        else:
                                                            return (64, 2, 4)
                                                else:
                                                    return (64, 2, 4)
                            else:
                                if f['max_seqlen_k'] <= 20480:
                                    if f['max_seqlen_q'] <= 1:
                                        if f['group'] <= 6:
                                            if f['num_seqs'] <= 1:
                                                if f['group'] <= 2:
                                                    return 'hand'
                                                else:
                                                    if f['programs'] <= 1:
                                                        return (64, 2, 1)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (64, 2, 1)
                                                        else:
                                                            return 'hand'
                                            else:
                                                return 'hand'
                                        else:
                                            if f['programs'] <= 3:
                                                if f['num_tokens'] <= 1:
                                                    return (64, 2, 1)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (64, 2, 1)
                                                    else:
                                                        return 'hand'
                                            else:
                                                if f['num_tokens'] <= 3:
                                                    if f['block_size'] <= 40:
                                                        return (64, 2, 8)
                                                    else:
                                                        return (64, 2, 2)
                                                else:
                                                    return (64, 2, 2)
                                    else:
                                        if f['programs'] <= 1:
                                            if f['group'] <= 2:
                                                return 'hand'
                                            else:
                                                if f['num_tokens'] <= 6:
                                                    if f['block_size'] <= 40:
                                                        if f['num_tokens'] <= 3:
                                                            return (64, 2, 1)
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (64, 2, 1)
                                                            else:
                                                                return 'hand'
                                                    else:
                                                        return (64, 2, 1)
                                                else:
                                                    return 'hand'
                                        else:
                                            if f['group'] <= 6:
                                                return 'hand'
                                            else:
                                                if f['num_kv_heads'] <= 1:
                                                    return 'hand'
                                                else:
                                                    if f['block_size'] <= 40:
                                                        if f['programs'] <= 3:
                                                            return 'hand'
                                                        else:
                                                            if f['max_seqlen_q'] <= 6:
                                                                return (64, 2, 2)
                                                            else:
                                                                return 'hand'
                                                    else:
                                                        return 'hand'
                                else:
                                    if f['programs'] <= 3:
                                        if f['max_seqlen_k'] <= 81920:
                                            if f['programs'] <= 1:
                                                if f['group'] <= 6:
                                                    if f['num_tokens'] <= 1:
                                                        return (64, 3, 1)
                                                    else:
                                                        if f['max_seqlen_q'] <= 3:
                                                            if f['block_size'] <= 40:
                                                                return (64, 2, 1)
                                                            else:
                                                                if f['group'] <= 2:
                                                                    return (64, 3, 1)
                                                                else:
                                                                    return (64, 2, 1)
                                                        else:
                                                            return (64, 2, 1)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        if f['num_tokens'] <= 3:
                                                            if f['num_tokens'] <= 1:
                                                                return (64, 3, 1)
                                                            else:
                                                                return (64, 2, 1)
                                                        else:
                                                            if f['max_seqlen_q'] <= 6:
                                                                return (64, 2, 8)
                                                            else:
                                                                return (64, 2, 1)
                                                    else:
                                                        if f['num_tokens'] <= 1:
                                                            return (64, 3, 1)
                                                        else:
                                                            return (64, 2, 1)
                                            else:
                                                if f['max_seqlen_q'] <= 1:
                                                    if f['block_size'] <= 40:
                                                        return (64, 3, 1)
                                                    else:
                                                        if f['num_kv_heads'] <= 1:
                                                            if f['group'] <= 2:
                                                                return (64, 3, 1)
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return (64, 3, 2)
                                                                else:
                                                                    return (64, 3, 1)
                                                        else:
                                                            return (64, 3, 1)
                                                else:
                                                    if f['group'] <= 6:
                                                        if f['max_seqlen_q'] <= 6:
                                                            return (64, 3, 1)
                                                        else:
                                                            if f['num_kv_heads'] <= 1:
                                                                return (64, 3, 1)
                                                            else:
                                                                if f['group'] <= 2:
                                                                    return (64, 3, 1)
                                                                else:
                                                                    if f['block_size'] <= 40:
                                                                        return (64, 2, 1)
                                                                    else:
                                                                        return (64, 3, 1)
                                                    else:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['max_seqlen_q'] <= 3:
                                                                return (64, 3, 1)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (64, 2, 1)
                                                                else:
                                                                    return (64, 3, 1)
                                                        else:
                                                            return 'hand'
                                        else:
                                            if f['num_tokens'] <= 12:
                                                return (64, 3, 1)
                                            else:
                                                if f['group'] <= 6:
                                                    return (64, 3, 1)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (64, 3, 1)
                                                    else:
                                                        return 'hand'
                                    else:
                                        if f['max_seqlen_q'] <= 6:
                                            if f['max_seqlen_k'] <= 81920:
                                                if f['group'] <= 6:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['group'] <= 2:
                                                            return (64, 2, 2)
                                                        else:
                                                            return (64, 3, 1)
                                                    else:
                                                        return (64, 2, 2)
                                                else:
                                                    return (64, 2, 2)
                                            else:
                                                if f['max_seqlen_q'] <= 1:
                                                    if f['num_kv_heads'] <= 1:
                                                        if f['group'] <= 6:
                                                            return (64, 3, 1)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (64, 3, 1)
                                                            else:
                                                                return (64, 2, 2)
                                                    else:
                                                        if f['group'] <= 2:
                                                            return (64, 2, 2)
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (64, 3, 1)
                                                            else:
                                                                return (64, 2, 2)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['num_tokens'] <= 6:
                                                            return (64, 2, 2)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (64, 3, 1)
                                                            else:
                                                                if f['num_tokens'] <= 12:
                                                                    return (64, 2, 2)
                                                                else:
                                                                    return (64, 3, 1)
                                                    else:
                                                        if f['num_kv_heads'] <= 1:
                                                            if f['group'] <= 6:
                                                                return (64, 2, 2)
                                                            else:
                                                                if f['num_tokens'] <= 12:
                                                                    if f['block_size'] <= 40:
                                                                        return (64, 3, 1)
                                                                    else:
                                                                        return (64, 2, 2)
                                                                else:
                                                                    return (64, 2, 2)
                                                        else:
                                                            return (64, 2, 2)
                                        else:
                                            if f['group'] <= 2:
                                                if f['max_seqlen_k'] <= 81920:
                                                    return (64, 2, 2)
                                                else:
                                                    if f['num_kv_heads'] <= 1:
                                                        return (64, 2, 2)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (64, 2, 2)
                                                        else:
                                                            return (64, 2, 8)
                                            else:
                                                if f['group'] <= 6:
                                                    return (64, 2, 2)
                                                else:
                                                    if f['num_kv_heads'] <= 1:
                                                        return 'hand'
                                                    else:
                                                        if f['max_seqlen_k'] <= 81920:
                                                            return 'hand'
                                                        else:
                                                            return (64, 2, 2)
                        else:
                            if f['max_seqlen_k'] <= 81920:
                                if f['num_tokens'] <= 48:
                                    if f['programs'] <= 12:
                                        if f['group'] <= 2:
                                            if f['max_seqlen_q'] <= 1:
                                                if f['max_seqlen_k'] <= 20480:
                                                    if f['block_size'] <= 40:
                                                        if f['kv_bits'] <= 12:
                                                            if f['num_tokens'] <= 2:
                                                                return (64, 2, 2)
                                                            else:
                                                                return (32, 2, 2)
                                                        else:
                                                            return (64, 2, 2)
                                                    else:
                                                        return (64, 2, 2)
                                                else:
                                                    return (64, 2, 2)
                                            else:
                                                return (64, 2, 2)
                                        else:
                                            return (64, 2, 2)
                                    else:
                                        if f['max_seqlen_k'] <= 20480:
                                            return (64, 2, 2)
                                        else:
                                            if f['kv_bits'] <= 12:
                                                if f['max_seqlen_q'] <= 1:
                                                    if f['group'] <= 2:
                                                        return (64, 2, 2)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (64, 2, 4)
                                                        else:
                                                            return (64, 2, 2)
                                                else:
                                                    if f['group'] <= 2:
                                                        return (64, 2, 4)
                                                    else:
                                                        if f['num_kv_heads'] <= 5:
                                                            if f['group'] <= 6:
                                                                return (64, 2, 4)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    if f['max_seqlen_q'] <= 3:
                                                                        return (64, 2, 4)
                                                                    else:
                                                                        return (64, 2, 2)
                                                                else:
                                                                    return (64, 2, 2)
                                                        else:
                                                            if f['max_seqlen_q'] <= 3:
                                                                if f['block_size'] <= 40:
                                                                    return (64, 2, 2)
                                                                else:
                                                                    if f['group'] <= 6:
                                                                        return (64, 2, 4)
                                                                    else:
                                                                        return (64, 2, 2)
                                                            else:
                                                                return (64, 2, 2)
                                            else:
                                                if f['max_seqlen_q'] <= 6:
                                                    if f['max_seqlen_q'] <= 3:
                                                        return (64, 2, 2)
                                                    else:
                                                        if f['group'] <= 2:
                                                            if f['block_size'] <= 40:
                                                                return (64, 2, 4)
                                                            else:
                                                                return (64, 2, 2)
                                                        else:
                                                            return (64, 2, 2)
                                                else:
                                                    if f['group'] <= 6:
                                                        if f['block_size'] <= 40:
                                                            if f['group'] <= 2:
                                                                return (64, 2, 4)
                                                            else:
                                                                return (64, 2, 2)
                                                        else:
                                                            return (64, 2, 2)
                                                    else:
                                                        return 'hand'
                                else:
                                    if f['max_seqlen_k'] <= 20480:
                                        return (64, 2, 2)
                                    else:
                                        if f['num_kv_heads'] <= 1:
                                            if f['num_seqs'] <= 12:
                                                return (64, 2, 2)
                                            else:
                                                if f['group'] <= 2:
                                                    if f['kv_bits'] <= 12:
                                                        return (64, 2, 4)
                                                    else:
                                                        if f['num_tokens'] <= 96:
                                                            if f['block_size'] <= 40:
                                                                return (64, 2, 4)
                                                            else:
                                                                return (64, 2, 2)
                                                        else:
                                                            return (64, 2, 4)
                                                else:
                                                    if f['group'] <= 6:
                                                        if f['block_size'] <= 40:
                                                            if f['max_seqlen_q'] <= 6:
                                                                if f['kv_bits'] <= 12:
                                                                    return (64, 2, 4)
                                                                else:
                                                                    return (64, 2, 2)
                                                            else:
                                                                if f['kv_bits'] <= 12:
                                                                    return (64, 2, 2)
                                                                else:
                                                                    return (64, 2, 4)
                                                        else:
                                                            if f['num_tokens'] <= 96:
                                                                if f['kv_bits'] <= 12:
                                                                    return (64, 2, 4)
                                                                else:
                                                                    return (64, 2, 2)
                                                            else:
                                                                return (64, 2, 2)
                                                    else:
                                                        if f['max_seqlen_q'] <= 6:
                                                            return (64, 2, 2)
                                                        else:
                                                            if f['kv_bits'] <= 12:
                                                                return (64, 2, 2)
                                                            else:
                                                                return 'hand'
                                        else:
                                            if f['kv_bits'] <= 12:
                                                if f['group'] <= 2:
                                                    return (64, 2, 4)
                                                else:
                                                    return (64, 2, 2)
                                            else:
                                                if f['group'] <= 6:
                                                    if f['group'] <= 2:
                                                        if f['block_size'] <= 40:
                                                            return (64, 2, 4)
                                                        else:
                                                            return (64, 2, 2)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (64, 2, 2)
                                                        else:
                                                            return 'hand'
                                                else:
                                                    return 'hand'
                            else:
                                if f['programs'] <= 12:
                                    if f['kv_bits'] <= 12:
                                        if f['block_size'] <= 40:
                                            if f['group'] <= 2:
                                                if f['max_seqlen_q'] <= 1:
                                                    return (64, 2, 2)
                                                else:
                                                    if f['max_seqlen_q'] <= 6:
                                                        return (64, 2, 4)
                                                    else:
                                                        return (64, 2, 2)
                                            else:
                                                if f['max_seqlen_q'] <= 1:
                                                    if f['group'] <= 6:
                                                        return (64, 2, 4)
                                                    else:
                                                        return (64, 2, 2)
                                                else:
                                                    if f['max_seqlen_q'] <= 6:
                                                        if f['num_tokens'] <= 3:
                                                            if f['group'] <= 6:
                                                                return (64, 2, 4)
                                                            else:
                                                                return (64, 2, 2)
                                                        else:
                                                            return (64, 2, 2)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (64, 2, 2)
                                                        else:
                                                            return (64, 2, 4)
                                        else:
                                            if f['group'] <= 2:
                                                if f['max_seqlen_q'] <= 1:
                                                    return (64, 2, 2)
                                                else:
                                                    if f['num_tokens'] <= 24:
                                                        return (64, 2, 4)
                                                    else:
                                                        if f['max_seqlen_q'] <= 6:
                                                            return (64, 2, 4)
                                                        else:
                                                            return (64, 2, 2)
                                            else:
                                                if f['num_seqs'] <= 6:
                                                    return (64, 2, 4)
                                                else:
                                                    if f['num_tokens'] <= 24:
                                                        if f['max_seqlen_q'] <= 1:
                                                            if f['group'] <= 6:
                                                                return (64, 2, 4)
                                                            else:
                                                                return (64, 2, 2)
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (64, 2, 2)
                                                            else:
                                                                return (64, 2, 4)
                                                    else:
                                                        return (64, 2, 4)
                                    else:
                                        if f['max_seqlen_q'] <= 6:
                                            if f['block_size'] <= 40:
                                                if f['num_tokens'] <= 12:
                                                    return (64, 2, 2)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['max_seqlen_q'] <= 3:
                                                            return (64, 2, 2)
                                                        else:
                                                            return (64, 2, 4)
                                                    else:
                                                        return (64, 2, 2)
                                            else:
                                                if f['num_tokens'] <= 3:
                                                    return (64, 2, 2)
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['group'] <= 2:
                                                            return (64, 2, 2)
                                                        else:
                                                            if f['group'] <= 6:
                                                                if f['num_kv_heads'] <= 1:
                                                                    return (64, 2, 4)
                                                                else:
                                                                    return (64, 2, 2)
                                                            else:
                                                                return (64, 2, 4)
                                                    else:
                                                        if f['group'] <= 6:
                                                            if f['group'] <= 2:
                                                                if f['max_seqlen_q'] <= 3:
                                                                    return (64, 2, 2)
                                                                else:
                                                                    return (64, 2, 4)
                                                            else:
                                                                if f['max_seqlen_q'] <= 3:
                                                                    return (64, 2, 4)
                                                                else:
                                                                    return (64, 2, 2)
                                                        else:
                                                            return (64, 2, 2)
                                        else:
                                            if f['group'] <= 6:
                                                if f['block_size'] <= 40:
                                                    return (64, 2, 2)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['num_kv_heads'] <= 1:
                                                            return (64, 2, 2)
                                                        else:
                                                            if f['num_kv_heads'] <= 5:
                                                                return (64, 2, 4)
                                                            else:
                                                                return (64, 2, 2)
                                                    else:
                                                        return (64, 2, 2)
                                            else:
                                                return 'hand'
                                else:
                                    if f['num_tokens'] <= 3:
                                        if f['group'] <= 6:
                                            if f['block_size'] <= 40:
                                                return (64, 2, 4)
                                            else:
                                                if f['group'] <= 2:
                                                    if f['kv_bits'] <= 12:
                                                        return (64, 2, 4)
                                                    else:
                                                        return (64, 2, 8)
                                                else:
                                                    return (64, 2, 4)
                                        else:
                                            if f['block_size'] <= 40:
                                                if f['kv_bits'] <= 12:
                                                    return (64, 3, 4)
                                                else:
                                                    return (64, 2, 4)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    return (64, 2, 4)
                                                else:
                                                    return (64, 2, 8)
                                    else:
                                        if f['kv_bits'] <= 12:
                                            return (64, 2, 4)
                                        else:
                                            if f['block_size'] <= 40:
                                                if f['max_seqlen_q'] <= 6:
                                                    return (64, 2, 4)
                                                else:
                                                    if f['group'] <= 6:
                                                        if f['num_kv_heads'] <= 1:
                                                            if f['group'] <= 2:
                                                                return (64, 2, 8)
                                                            else:
                                                                return (64, 2, 4)
                                                        else:
                                                            return (64, 2, 4)
                                                    else:
                                                        return 'hand'
                                            else:
                                                if f['max_seqlen_q'] <= 3:
                                                    if f['num_tokens'] <= 12:
                                                        if f['group'] <= 2:
                                                            return (64, 2, 8)
                                                        else:
                                                            if f['group'] <= 6:
                                                                if f['num_kv_heads'] <= 5:
                                                                    return (64, 2, 4)
                                                                else:
                                                                    return (64, 2, 8)
                                                            else:
                                                                return (64, 2, 4)
                                                    else:
                                                        if f['max_seqlen_q'] <= 1:
                                                            if f['group'] <= 2:
                                                                return (64, 2, 8)
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return (64, 2, 4)
                                                                else:
                                                                    return (64, 2, 8)
                                                        else:
                                                            return (64, 2, 8)
                                                else:
                                                    if f['group'] <= 6:
                                                        if f['num_tokens'] <= 48:
                                                            return (64, 2, 4)
                                                        else:
                                                            if f['group'] <= 2:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    return (64, 2, 4)
                                                                else:
                                                                    return (64, 2, 8)
                                                            else:
                                                                if f['max_seqlen_q'] <= 6:
                                                                    return (64, 2, 8)
                                                                else:
                                                                    return (64, 2, 4)
                                                    else:
                                                        if f['max_seqlen_q'] <= 6:
                                                            return (64, 2, 4)
                                                        else:
                                                            return 'hand'
                    else:
                        if f['programs'] <= 96:
                            if f['max_seqlen_k'] <= 20480:
                                if f['programs'] <= 48:
                                    if f['max_seqlen_q'] <= 6:
                                        if f['group'] <= 2:
                                            if f['kv_bits'] <= 12:
                                                if f['num_tokens'] <= 12:
                                                    return (64, 2, 2)
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['block_size'] <= 40:
                                                            if f['num_kv_heads'] <= 1:
                                                                return (64, 2, 4)
                                                            else:
                                                                return (64, 2, 2)
                                                        else:
                                                            return (64, 2, 2)
                                                    else:
                                                        return (64, 2, 4)
                                            else:
                                                return (64, 2, 4)
                                        else:
                                            return (64, 2, 4)
                                    else:
                                        if f['group'] <= 6:
                                            return (64, 2, 4)
                                        else:
                                            if f['kv_bits'] <= 12:
                                                return (64, 2, 4)
                                            else:
                                                return 'hand'
                                else:
                                    if f['group'] <= 2:
                                        if f['num_tokens'] <= 192:
                                            return 'hand'
                                        else:
                                            if f['max_seqlen_q'] <= 6:
                                                if f['block_size'] <= 40:
                                                    return 'hand'
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        return (64, 2, 4)
                                                    else:
                                                        return 'hand'
                                            else:
                                                return 'hand'
                                    else:
                                        if f['max_seqlen_q'] <= 3:
                                            if f['group'] <= 6:
                                                return (64, 2, 8)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    if f['max_seqlen_q'] <= 1:
                                                        return (64, 2, 8)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            if f['num_kv_heads'] <= 5:
                                                                return (64, 2, 8)
                                                            else:
                                                                return (64, 2, 4)
                                                        else:
                                                            return (64, 2, 4)
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['block_size'] <= 40:
                                                            if f['num_kv_heads'] <= 5:
                                                                return (64, 2, 1)
                                                            else:
                                                                return (64, 2, 8)
                                                        else:
                                                            if f['num_seqs'] <= 20:
                                                                return 'hand'
                                                            else:
                                                                return (64, 2, 8)
                                                    else:
                                                        return (64, 2, 1)
                                        else:
                                            if f['kv_bits'] <= 12:
                                                if f['max_seqlen_q'] <= 6:
                                                    if f['num_tokens'] <= 80:
                                                        if f['group'] <= 6:
                                                            return (64, 2, 4)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return 'hand'
                                                            else:
                                                                return (64, 2, 4)
                                                    else:
                                                        return (64, 2, 4)
                                                else:
                                                    if f['group'] <= 6:
                                                        if f['num_seqs'] <= 20:
                                                            return 'hand'
                                                        else:
                                                            return (64, 2, 4)
                                                    else:
                                                        return 'hand'
                                            else:
                                                if f['group'] <= 6:
                                                    if f['num_tokens'] <= 48:
                                                        return 'hand'
                                                    else:
                                                        return (64, 2, 1)
                                                else:
                                                    if f['max_seqlen_q'] <= 6:
                                                        return (64, 2, 1)
                                                    else:
                                                        return 'hand'
                            else:
                                if f['kv_bits'] <= 12:
                                    if f['programs'] <= 48:
                                        if f['max_seqlen_k'] <= 81920:
                                            return (64, 2, 4)
                                        else:
                                            return (64, 2, 8)
                                    else:
                                        if f['max_seqlen_k'] <= 81920:
                                            if f['num_kv_heads'] <= 5:
                                                return (64, 2, 8)
                                            else:
                                                if f['num_tokens'] <= 48:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['group'] <= 2:
                                                            if f['block_size'] <= 40:
                                                                return 'hand'
                                                            else:
                                                                return (64, 2, 8)
                                                        else:
                                                            return (64, 2, 8)
                                                    else:
                                                        return (64, 2, 8)
                                                else:
                                                    if f['group'] <= 2:
                                                        return 'hand'
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (64, 2, 8)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (64, 2, 4)
                                                            else:
                                                                return 'hand'
                                        else:
                                            if f['group'] <= 2:
                                                if f['num_kv_heads'] <= 1:
                                                    if f['num_tokens'] <= 192:
                                                        if f['num_tokens'] <= 96:
                                                            return 'hand'
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return 'hand'
                                                            else:
                                                                return (64, 2, 4)
                                                    else:
                                                        return 'hand'
                                                else:
                                                    return 'hand'
                                            else:
                                                if f['max_seqlen_q'] <= 6:
                                                    if f['num_kv_heads'] <= 5:
                                                        if f['group'] <= 6:
                                                            return (64, 2, 8)
                                                        else:
                                                            if f['max_seqlen_q'] <= 3:
                                                                if f['num_tokens'] <= 48:
                                                                    if f['block_size'] <= 40:
                                                                        return (64, 2, 4)
                                                                    else:
                                                                        return (64, 2, 8)
                                                                else:
                                                                    return (64, 2, 8)
                                                            else:
                                                                return (64, 2, 4)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (64, 2, 4)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (64, 2, 4)
                                                            else:
                                                                if f['max_seqlen_q'] <= 1:
                                                                    return (64, 2, 4)
                                                                else:
                                                                    if f['max_seqlen_q'] <= 3:
                                                                        return (64, 2, 8)
                                                                    else:
                                                                        return (64, 2, 4)
                                                else:
                                                    if f['group'] <= 6:
                                                        if f['num_seqs'] <= 20:
                                                            return 'hand'
                                                        else:
                                                            return (64, 2, 4)
                                                    else:
                                                        return 'hand'
                                else:
                                    if f['num_tokens'] <= 192:
                                        if f['group'] <= 6:
                                            if f['max_seqlen_q'] <= 6:
                                                return (64, 2, 8)
                                            else:
                                                if f['programs'] <= 48:
                                                    return (64, 2, 8)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        if f['group'] <= 2:
                                                            return (64, 2, 8)
                                                        else:
                                                            return (64, 2, 1)
                                                    else:
                                                        return (64, 2, 8)
                                        else:
                                            if f['max_seqlen_q'] <= 6:
                                                if f['programs'] <= 48:
                                                    return (64, 2, 8)
                                                else:
                                                    if f['max_seqlen_q'] <= 3:
                                                        return (64, 2, 8)
                                                    else:
                                                        if f['num_kv_heads'] <= 5:
                                                            if f['block_size'] <= 40:
                                                                return (64, 2, 1)
                                                            else:
                                                                return (64, 2, 8)
                                                        else:
                                                            return (64, 2, 1)
                                            else:
                                                if f['max_seqlen_k'] <= 81920:
                                                    if f['programs'] <= 48:
                                                        return 'hand'
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (64, 2, 1)
                                                        else:
                                                            return 'hand'
                                                else:
                                                    return (64, 2, 8)
                                    else:
                                        if f['group'] <= 6:
                                            if f['block_size'] <= 40:
                                                if f['group'] <= 2:
                                                    return (64, 2, 8)
                                                else:
                                                    if f['programs'] <= 48:
                                                        return (64, 2, 8)
                                                    else:
                                                        if f['max_seqlen_q'] <= 6:
                                                            return (64, 2, 8)
                                                        else:
                                                            return (64, 2, 1)
                                            else:
                                                return (64, 2, 8)
                                        else:
                                            if f['programs'] <= 48:
                                                if f['max_seqlen_k'] <= 81920:
                                                    return 'hand'
                                                else:
                                                    return (64, 2, 8)
                                            else:
                                                return (64, 2, 1)
                        else:
                            if f['num_tokens'] <= 48:
                                if f['kv_bits'] <= 12:
                                    if f['max_seqlen_k'] <= 20480:
                                        return (64, 2, 1)
                                    else:
                                        if f['block_size'] <= 40:
                                            if f['max_seqlen_q'] <= 1:
                                                if f['group'] <= 2:
                                                    return (64, 2, 1)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (64, 2, 4)
                                                    else:
                                                        return (64, 2, 1)
                                            else:
                                                return (64, 2, 4)
                                        else:
                                            if f['num_tokens'] <= 24:
                                                return (64, 3, 1)
                                            else:
                                                if f['group'] <= 2:
                                                    return (64, 3, 1)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (64, 2, 1)
                                                    else:
                                                        return (64, 3, 1)
                                else:
                                    if f['block_size'] <= 40:
                                        if f['max_seqlen_k'] <= 20480:
                                            return (64, 3, 0)
                                        else:
                                            if f['group'] <= 6:
                                                if f['group'] <= 2:
                                                    if f['max_seqlen_q'] <= 1:
                                                        return (128, 2, 0)
                                                    else:
                                                        return (64, 3, 0)
                                                else:
                                                    return (64, 3, 0)
                                            else:
                                                return (64, 3, 1)
                                    else:
                                        return (64, 3, 0)
                            else:
                                if f['max_seqlen_k'] <= 20480:
                                    if f['kv_bits'] <= 12:
                                        if f['max_seqlen_q'] <= 6:
                                            return (64, 2, 1)
                                        else:
                                            if f['group'] <= 6:
                                                return (64, 2, 1)
                                            else:
                                                return (32, 2, 1)
                                    else:
                                        if f['max_seqlen_q'] <= 3:
                                            if f['block_size'] <= 40:
                                                if f['group'] <= 2:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['num_tokens'] <= 96:
                                                            if f['group'] <= 6:
                                                                return (64, 3, 0)
                                                            else:
                                                                return (64, 2, 1)
                                                        else:
                                                            return (64, 3, 0)
                                                    else:
                                                        return (64, 2, 1)
                                            else:
                                                return (64, 3, 0)
                                        else:
                                            if f['group'] <= 2:
                                                if f['max_seqlen_q'] <= 6:
                                                    if f['num_seqs'] <= 40:
                                                        if f['block_size'] <= 40:
                                                            return (128, 2, 0)
                                                        else:
                                                            return (64, 3, 0)
                                                    else:
                                                        return (128, 2, 0)
                                                else:
                                                    return (64, 2, 1)
                                            else:
                                                if f['num_kv_heads'] <= 5:
                                                    if f['num_kv_heads'] <= 1:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['group'] <= 6:
                                                                return (64, 2, 1)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 2, 0)
                                                                else:
                                                                    return (64, 2, 1)
                                                        else:
                                                            return (64, 2, 1)
                                                    else:
                                                        return (64, 2, 1)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (64, 2, 1)
                                                    else:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['block_size'] <= 40:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (64, 2, 1)
                                                        else:
                                                            return (64, 3, 0)
                                else:
                                    if f['kv_bits'] <= 12:
                                        if f['max_seqlen_q'] <= 3:
                                            if f['block_size'] <= 40:
                                                if f['max_seqlen_q'] <= 1:
                                                    return (64, 2, 1)
                                                else:
                                                    if f['num_kv_heads'] <= 1:
                                                        if f['group'] <= 6:
                                                            return (64, 2, 1)
                                                        else:
                                                            return (64, 2, 4)
                                                    else:
                                                        return (64, 2, 4)
                                            else:
                                                if f['num_tokens'] <= 96:
                                                    if f['group'] <= 2:
                                                        return (64, 2, 1)
                                                    else:
                                                        return (64, 3, 1)
                                                else:
                                                    return (64, 3, 1)
                                        else:
                                            if f['num_tokens'] <= 768:
                                                if f['group'] <= 2:
                                                    if f['max_seqlen_q'] <= 6:
                                                        return (64, 2, 1)
                                                    else:
                                                        return (64, 2, 4)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (64, 2, 4)
                                                    else:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['block_size'] <= 40:
                                                                return (64, 2, 4)
                                                            else:
                                                                if f['num_kv_heads'] <= 1:
                                                                    return (64, 2, 4)
                                                                else:
                                                                    if f['num_tokens'] <= 160:
                                                                        return (64, 2, 4)
                                                                    else:
                                                                        return (64, 3, 1)
                                                        else:
                                                            if f['num_seqs'] <= 40:
                                                                return (64, 2, 1)
                                                            else:
                                                                return (32, 2, 1)
                                            else:
                                                if f['group'] <= 2:
                                                    if f['block_size'] <= 40:
                                                        return (64, 2, 4)
                                                    else:
                                                        return (64, 2, 1)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (64, 2, 1)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (64, 2, 1)
                                                        else:
                                                            return (32, 2, 1)
                                    else:
                                        if f['block_size'] <= 40:
                                            if f['max_seqlen_q'] <= 1:
                                                if f['num_tokens'] <= 96:
                                                    if f['group'] <= 2:
                                                        return (128, 2, 0)
                                                    else:
                                                        return (64, 2, 1)
                                                else:
                                                    return (64, 2, 1)
                                            else:
                                                if f['max_seqlen_q'] <= 6:
                                                    if f['num_tokens'] <= 384:
                                                        if f['num_seqs'] <= 96:
                                                            if f['group'] <= 6:
                                                                if f['group'] <= 2:
                                                                    if f['num_seqs'] <= 40:
                                                                        return (64, 2, 1)
                                                                    else:
                                                                        return (128, 2, 0)
                                                                else:
                                                                    if f['num_kv_heads'] <= 5:
                                                                        return (64, 2, 1)
                                                                    else:
                                                                        return (128, 2, 0)
                                                            else:
                                                                return (128, 2, 0)
                                                        else:
                                                            if f['group'] <= 2:
                                                                return (128, 2, 0)
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return (64, 3, 1)
                                                                else:
                                                                    return (64, 2, 1)
                                                    else:
                                                        return (128, 2, 0)
                                                else:
                                                    if f['group'] <= 2:
                                                        return (64, 2, 1)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (128, 2, 0)
                                                        else:
                                                            if f['num_tokens'] <= 320:
                                                                return (64, 3, 0)
                                                            else:
                                                                return (64, 2, 1)
                                        else:
                                            if f['group'] <= 2:
                                                if f['num_tokens'] <= 384:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['max_seqlen_q'] <= 6:
                                                        return (128, 2, 0)
                                                    else:
                                                        return (64, 2, 1)
                                            else:
                                                if f['max_seqlen_q'] <= 3:
                                                    if f['max_seqlen_q'] <= 1:
                                                        return (64, 3, 0)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (64, 3, 0)
                                                        else:
                                                            return (64, 3, 1)
                                                else:
                                                    if f['max_seqlen_q'] <= 6:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (128, 2, 0)
                                                        else:
                                                            return (64, 3, 0)
        else:
            if f['head_dim'] <= 192:
                if f['head_dim'] <= 96:
                    if f['programs'] <= 384:
                        if f['max_seqlen_k'] <= 5120:
                            if f['kv_bits'] <= 12:
                                if f['max_seqlen_k'] <= 1280:
                                    if f['block_size'] <= 40:
                                        if f['max_seqlen_q'] <= 3:
                                            if f['num_tokens'] <= 192:
                                                return 'hand'
                                            else:
                                                if f['group'] <= 2:
                                                    return 'hand'
                                                else:
                                                    if f['num_seqs'] <= 192:
                                                        if f['group'] <= 6:
                                                            return 'hand'
                                                        else:
                                                            return (128, 2, 0)
                                                    else:
                                                        return (128, 2, 0)
                                        else:
                                            if f['num_tokens'] <= 192:
                                                if f['group'] <= 2:
                                                    return 'hand'
                                                else:
                                                    return (128, 2, 0)
                                            else:
                                                if f['num_tokens'] <= 1536:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (128, 2, 0)
                                                    else:
                                                        return 'hand'
                                    else:
                                        return (128, 2, 0)
                                else:
                                    if f['block_size'] <= 40:
                                        if f['max_seqlen_q'] <= 3:
                                            return (128, 2, 4)
                                        else:
                                            if f['group'] <= 2:
                                                return (128, 2, 4)
                                            else:
                                                if f['max_seqlen_q'] <= 6:
                                                    if f['group'] <= 6:
                                                        if f['num_tokens'] <= 320:
                                                            return (128, 2, 4)
                                                        else:
                                                            return (128, 3, 4)
                                                    else:
                                                        return 'hand'
                                                else:
                                                    return 'hand'
                                    else:
                                        if f['num_tokens'] <= 192:
                                            return (64, 3, 2)
                                        else:
                                            if f['max_seqlen_q'] <= 3:
                                                if f['group'] <= 6:
                                                    if f['num_seqs'] <= 192:
                                                        if f['group'] <= 2:
                                                            return (128, 3, 4)
                                                        else:
                                                            return (64, 3, 2)
                                                    else:
                                                        return (128, 3, 4)
                                                else:
                                                    return (64, 3, 2)
                                            else:
                                                if f['group'] <= 6:
                                                    if f['num_tokens'] <= 1536:
                                                        if f['max_seqlen_q'] <= 6:
                                                            return (64, 3, 2)
                                                        else:
                                                            if f['num_kv_heads'] <= 5:
                                                                if f['group'] <= 2:
                                                                    return (64, 3, 2)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                return (64, 3, 2)
                                                    else:
                                                        if f['group'] <= 2:
                                                            return (128, 3, 4)
                                                        else:
                                                            return 'hand'
                                                else:
                                                    if f['num_tokens'] <= 768:
                                                        if f['num_kv_heads'] <= 5:
                                                            return (64, 3, 2)
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        return 'hand'
                            else:
                                if f['num_tokens'] <= 48:
                                    if f['group'] <= 2:
                                        if f['max_seqlen_k'] <= 1280:
                                            return (128, 2, 0)
                                        else:
                                            if f['block_size'] <= 40:
                                                return (128, 2, 0)
                                            else:
                                                return (64, 2, 2)
                                    else:
                                        return (128, 2, 0)
                                else:
                                    if f['block_size'] <= 40:
                                        if f['max_seqlen_q'] <= 1:
                                            if f['group'] <= 2:
                                                if f['num_seqs'] <= 192:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['max_seqlen_k'] <= 1280:
                                                        return (128, 2, 1)
                                                    else:
                                                        return (128, 2, 0)
                                            else:
                                                return (128, 2, 0)
                                        else:
                                            if f['max_seqlen_k'] <= 1280:
                                                return (128, 2, 0)
                                            else:
                                                if f['max_seqlen_q'] <= 6:
                                                    if f['group'] <= 6:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['max_seqlen_q'] <= 3:
                                                            return (128, 2, 0)
                                                        else:
                                                            if f['num_tokens'] <= 320:
                                                                return (128, 2, 0)
                                                            else:
                                                                return 'hand'
                                                else:
                                                    if f['group'] <= 2:
                                                        return (128, 2, 0)
                                                    else:
                                                        return 'hand'
                                    else:
                                        return (128, 2, 0)
                        else:
                            if f['kv_bits'] <= 12:
                                return (128, 3, 4)
                            else:
                                if f['max_seqlen_k'] <= 20480:
                                    if f['max_seqlen_q'] <= 3:
                                        return (128, 3, 4)
                                    else:
                                        if f['group'] <= 2:
                                            return (128, 3, 4)
                                        else:
                                            if f['group'] <= 6:
                                                if f['max_seqlen_q'] <= 6:
                                                    return (128, 3, 4)
                                                else:
                                                    return 'hand'
                                            else:
                                                return 'hand'
                                else:
                                    if f['group'] <= 6:
                                        if f['max_seqlen_q'] <= 3:
                                            if f['num_seqs'] <= 192:
                                                if f['block_size'] <= 40:
                                                    if f['num_tokens'] <= 96:
                                                        return (128, 3, 4)
                                                    else:
                                                        if f['max_seqlen_q'] <= 1:
                                                            if f['group'] <= 2:
                                                                return (128, 3, 4)
                                                            else:
                                                                return (64, 3, 8)
                                                        else:
                                                            if f['group'] <= 2:
                                                                return (64, 3, 8)
                                                            else:
                                                                return (128, 3, 4)
                                                else:
                                                    return (64, 3, 8)
                                            else:
                                                return (64, 3, 8)
                                        else:
                                            if f['max_seqlen_q'] <= 6:
                                                if f['group'] <= 2:
                                                    if f['block_size'] <= 40:
                                                        return (128, 3, 4)
                                                    else:
                                                        return (64, 3, 8)
                                                else:
                                                    return (128, 3, 4)
                                            else:
                                                if f['group'] <= 2:
                                                    if f['block_size'] <= 40:
                                                        return (128, 3, 4)
                                                    else:
                                                        return (64, 3, 8)
                                                else:
                                                    return 'hand'
                                    else:
                                        if f['max_seqlen_q'] <= 3:
                                            if f['block_size'] <= 40:
                                                if f['max_seqlen_q'] <= 1:
                                                    if f['num_tokens'] <= 192:
                                                        if f['num_kv_heads'] <= 5:
                                                            return (128, 2, 4)
                                                        else:
                                                            return (128, 3, 4)
                                                    else:
                                                        return (64, 3, 8)
                                                else:
                                                    return (128, 3, 4)
                                            else:
                                                if f['num_seqs'] <= 80:
                                                    if f['max_seqlen_q'] <= 1:
                                                        return (64, 3, 8)
                                                    else:
                                                        return (128, 3, 4)
                                                else:
                                                    return (64, 3, 8)
                                        else:
                                            return 'hand'
                    else:
                        if f['max_seqlen_k'] <= 5120:
                            if f['max_seqlen_k'] <= 1280:
                                if f['kv_bits'] <= 12:
                                    if f['num_tokens'] <= 1536:
                                        return 'hand'
                                    else:
                                        if f['group'] <= 6:
                                            if f['programs'] <= 1280:
                                                return 'hand'
                                            else:
                                                if f['block_size'] <= 40:
                                                    return (128, 2, 0)
                                                else:
                                                    return 'hand'
                                        else:
                                            if f['programs'] <= 1280:
                                                return (32, 2, 0)
                                            else:
                                                return 'hand'
                                else:
                                    if f['programs'] <= 1536:
                                        if f['max_seqlen_q'] <= 3:
                                            if f['programs'] <= 768:
                                                return 'hand'
                                            else:
                                                if f['num_tokens'] <= 192:
                                                    if f['block_size'] <= 40:
                                                        return 'hand'
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (128, 2, 0)
                                                        else:
                                                            return (64, 3, 0)
                                                else:
                                                    return 'hand'
                                        else:
                                            if f['num_tokens'] <= 1536:
                                                if f['group'] <= 2:
                                                    if f['programs'] <= 768:
                                                        if f['num_tokens'] <= 384:
                                                            if f['block_size'] <= 40:
                                                                return (128, 2, 0)
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return 'hand'
                                                        else:
                                                            return (128, 2, 0)
                                                else:
                                                    if f['num_kv_heads'] <= 5:
                                                        if f['group'] <= 6:
                                                            return 'hand'
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (64, 3, 0)
                                                    else:
                                                        if f['group'] <= 6:
                                                            if f['max_seqlen_q'] <= 6:
                                                                if f['programs'] <= 768:
                                                                    return (128, 2, 0)
                                                                else:
                                                                    if f['block_size'] <= 40:
                                                                        return 'hand'
                                                                    else:
                                                                        return (128, 2, 0)
                                                            else:
                                                                return (128, 2, 0)
                                                        else:
                                                            return (128, 2, 0)
                                            else:
                                                if f['group'] <= 6:
                                                    if f['group'] <= 2:
                                                        return 'hand'
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (128, 2, 0)
                                                        else:
                                                            return (64, 3, 0)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (32, 2, 0)
                                                    else:
                                                        return (32, 2, 1)
                                    else:
                                        if f['max_seqlen_q'] <= 3:
                                            if f['group'] <= 2:
                                                if f['max_seqlen_q'] <= 1:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return 'hand'
                                                    else:
                                                        return (64, 3, 0)
                                            else:
                                                if f['block_size'] <= 40:
                                                    if f['num_tokens'] <= 384:
                                                        return (64, 3, 0)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (64, 3, 0)
                                                        else:
                                                            return (64, 3, 1)
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['group'] <= 6:
                                                            return (64, 3, 1)
                                                        else:
                                                            return (64, 3, 0)
                                                    else:
                                                        return (64, 3, 0)
                                        else:
                                            if f['group'] <= 2:
                                                if f['block_size'] <= 40:
                                                    return (128, 2, 0)
                                                else:
                                                    return (64, 3, 0)
                                            else:
                                                return (64, 3, 0)
                            else:
                                if f['programs'] <= 768:
                                    if f['block_size'] <= 40:
                                        if f['max_seqlen_q'] <= 3:
                                            if f['group'] <= 6:
                                                if f['num_tokens'] <= 96:
                                                    if f['kv_bits'] <= 12:
                                                        return 'hand'
                                                    else:
                                                        if f['group'] <= 2:
                                                            return 'hand'
                                                        else:
                                                            return (64, 3, 0)
                                                else:
                                                    return 'hand'
                                            else:
                                                return 'hand'
                                        else:
                                            if f['group'] <= 2:
                                                if f['num_tokens'] <= 1536:
                                                    return 'hand'
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        return (128, 3, 0)
                                                    else:
                                                        return 'hand'
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    return (128, 3, 0)
                                                else:
                                                    if f['group'] <= 6:
                                                        if f['max_seqlen_q'] <= 6:
                                                            return 'hand'
                                                        else:
                                                            return (128, 3, 0)
                                                    else:
                                                        return (128, 3, 0)
                                    else:
                                        if f['kv_bits'] <= 12:
                                            if f['num_tokens'] <= 1536:
                                                if f['max_seqlen_q'] <= 3:
                                                    if f['group'] <= 6:
                                                        return 'hand'
                                                    else:
                                                        if f['max_seqlen_q'] <= 1:
                                                            return 'hand'
                                                        else:
                                                            return (128, 3, 0)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['num_tokens'] <= 384:
                                                            return 'hand'
                                                        else:
                                                            return (128, 3, 0)
                                                    else:
                                                        return (128, 3, 0)
                                            else:
                                                if f['group'] <= 2:
                                                    return (128, 3, 0)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (128, 3, 2)
                                                    else:
                                                        return (128, 3, 0)
                                        else:
                                            if f['num_tokens'] <= 96:
                                                return (64, 3, 0)
                                            else:
                                                if f['max_seqlen_q'] <= 3:
                                                    if f['group'] <= 2:
                                                        return (64, 3, 0)
                                                    else:
                                                        if f['max_seqlen_q'] <= 1:
                                                            if f['group'] <= 6:
                                                                return (64, 3, 0)
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            return 'hand'
                                                else:
                                                    if f['num_seqs'] <= 160:
                                                        return (64, 3, 0)
                                                    else:
                                                        if f['group'] <= 6:
                                                            if f['max_seqlen_q'] <= 6:
                                                                if f['group'] <= 2:
                                                                    return (64, 3, 0)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                if f['group'] <= 2:
                                                                    return 'hand'
                                                                else:
                                                                    return (64, 3, 0)
                                                        else:
                                                            return (64, 3, 0)
                                else:
                                    if f['kv_bits'] <= 12:
                                        if f['group'] <= 6:
                                            if f['max_seqlen_q'] <= 6:
                                                if f['max_seqlen_q'] <= 1:
                                                    if f['num_tokens'] <= 192:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['group'] <= 2:
                                                            return (128, 2, 0)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (128, 2, 0)
                                                            else:
                                                                return 'hand'
                                                else:
                                                    return (128, 2, 0)
                                            else:
                                                if f['group'] <= 2:
                                                    return (128, 2, 0)
                                                else:
                                                    return (128, 3, 0)
                                        else:
                                            if f['max_seqlen_q'] <= 1:
                                                if f['block_size'] <= 40:
                                                    return (128, 2, 0)
                                                else:
                                                    return 'hand'
                                            else:
                                                return (128, 3, 0)
                                    else:
                                        if f['num_tokens'] <= 192:
                                            if f['group'] <= 2:
                                                return (128, 2, 0)
                                            else:
                                                if f['group'] <= 6:
                                                    if f['block_size'] <= 40:
                                                        return (64, 3, 0)
                                                    else:
                                                        return (64, 3, 1)
                                                else:
                                                    return (64, 3, 0)
                                        else:
                                            if f['block_size'] <= 40:
                                                if f['num_tokens'] <= 384:
                                                    if f['group'] <= 6:
                                                        if f['num_seqs'] <= 192:
                                                            if f['group'] <= 2:
                                                                return 'hand'
                                                            else:
                                                                return (128, 3, 0)
                                                        else:
                                                            if f['group'] <= 2:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (64, 3, 0)
                                                    else:
                                                        if f['programs'] <= 1536:
                                                            return (128, 3, 4)
                                                        else:
                                                            return (128, 3, 0)
                                                else:
                                                    if f['group'] <= 2:
                                                        return 'hand'
                                                    else:
                                                        return (128, 3, 0)
                                            else:
                                                if f['programs'] <= 1536:
                                                    if f['group'] <= 2:
                                                        if f['max_seqlen_q'] <= 6:
                                                            return (64, 3, 0)
                                                        else:
                                                            return (128, 2, 0)
                                                    else:
                                                        if f['num_tokens'] <= 384:
                                                            if f['group'] <= 6:
                                                                return (64, 3, 0)
                                                            else:
                                                                return (128, 3, 0)
                                                        else:
                                                            return (128, 3, 0)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['max_seqlen_q'] <= 1:
                                                            return (128, 2, 0)
                                                        else:
                                                            if f['max_seqlen_q'] <= 3:
                                                                return (64, 3, 0)
                                                            else:
                                                                if f['num_tokens'] <= 1536:
                                                                    return (128, 2, 0)
                                                                else:
                                                                    return (64, 3, 0)
                                                    else:
                                                        return (64, 3, 0)
                        else:
                            if f['programs'] <= 768:
                                if f['max_seqlen_q'] <= 3:
                                    if f['num_tokens'] <= 96:
                                        if f['group'] <= 6:
                                            if f['group'] <= 2:
                                                return (128, 3, 8)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    return (128, 3, 8)
                                                else:
                                                    if f['max_seqlen_k'] <= 20480:
                                                        if f['block_size'] <= 40:
                                                            return (128, 3, 8)
                                                        else:
                                                            return (64, 3, 0)
                                                    else:
                                                        return (128, 3, 8)
                                        else:
                                            if f['max_seqlen_k'] <= 20480:
                                                if f['kv_bits'] <= 12:
                                                    if f['block_size'] <= 40:
                                                        return 'hand'
                                                    else:
                                                        return (128, 3, 8)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (128, 3, 8)
                                                    else:
                                                        return 'hand'
                                            else:
                                                return (128, 3, 8)
                                    else:
                                        if f['max_seqlen_k'] <= 20480:
                                            if f['kv_bits'] <= 12:
                                                if f['group'] <= 6:
                                                    return (128, 3, 8)
                                                else:
                                                    if f['num_tokens'] <= 192:
                                                        if f['block_size'] <= 40:
                                                            return (128, 2, 8)
                                                        else:
                                                            return (128, 3, 8)
                                                    else:
                                                        return (128, 3, 8)
                                            else:
                                                if f['block_size'] <= 40:
                                                    return (128, 3, 8)
                                                else:
                                                    if f['group'] <= 2:
                                                        return (128, 3, 8)
                                                    else:
                                                        if f['group'] <= 6:
                                                            if f['max_seqlen_q'] <= 1:
                                                                return (64, 3, 0)
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            if f['max_seqlen_q'] <= 1:
                                                                return 'hand'
                                                            else:
                                                                return (64, 3, 0)
                                        else:
                                            return (128, 3, 8)
                                else:
                                    if f['group'] <= 6:
                                        if f['max_seqlen_q'] <= 6:
                                            if f['max_seqlen_k'] <= 20480:
                                                if f['kv_bits'] <= 12:
                                                    if f['num_tokens'] <= 640:
                                                        if f['group'] <= 2:
                                                            return (128, 3, 8)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (128, 2, 8)
                                                            else:
                                                                return (128, 3, 8)
                                                    else:
                                                        return (128, 3, 8)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (128, 3, 8)
                                                    else:
                                                        if f['group'] <= 2:
                                                            if f['num_seqs'] <= 160:
                                                                return 'hand'
                                                            else:
                                                                return (128, 3, 8)
                                                        else:
                                                            return (64, 3, 0)
                                            else:
                                                return (128, 3, 8)
                                        else:
                                            if f['kv_bits'] <= 12:
                                                if f['group'] <= 2:
                                                    if f['max_seqlen_k'] <= 20480:
                                                        if f['num_kv_heads'] <= 5:
                                                            return (128, 3, 8)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (128, 2, 8)
                                                            else:
                                                                return (128, 3, 8)
                                                    else:
                                                        return (128, 3, 8)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        if f['num_tokens'] <= 1280:
                                                            if f['max_seqlen_k'] <= 20480:
                                                                return (128, 3, 2)
                                                            else:
                                                                return (128, 3, 8)
                                                        else:
                                                            return (128, 3, 2)
                                                    else:
                                                        return (128, 3, 2)
                                            else:
                                                if f['group'] <= 2:
                                                    if f['block_size'] <= 40:
                                                        if f['num_kv_heads'] <= 5:
                                                            if f['max_seqlen_k'] <= 20480:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (128, 3, 8)
                                                        else:
                                                            return (128, 2, 0)
                                                    else:
                                                        if f['max_seqlen_k'] <= 20480:
                                                            if f['num_kv_heads'] <= 5:
                                                                return (128, 3, 8)
                                                            else:
                                                                return (128, 2, 0)
                                                        else:
                                                            return (128, 3, 8)
                                                else:
                                                    if f['num_tokens'] <= 1280:
                                                        if f['block_size'] <= 40:
                                                            return (128, 3, 0)
                                                        else:
                                                            if f['max_seqlen_k'] <= 20480:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (128, 3, 4)
                                                    else:
                                                        return (128, 3, 0)
                                    else:
                                        if f['kv_bits'] <= 12:
                                            if f['max_seqlen_q'] <= 6:
                                                if f['num_seqs'] <= 160:
                                                    if f['block_size'] <= 40:
                                                        return (128, 3, 8)
                                                    else:
                                                        return (128, 3, 2)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        if f['max_seqlen_k'] <= 20480:
                                                            return (128, 3, 2)
                                                        else:
                                                            return (128, 3, 8)
                                                    else:
                                                        return (128, 3, 8)
                                            else:
                                                return (128, 3, 2)
                                        else:
                                            return (128, 3, 0)
                            else:
                                if f['kv_bits'] <= 12:
                                    if f['block_size'] <= 40:
                                        if f['group'] <= 2:
                                            if f['max_seqlen_q'] <= 1:
                                                if f['num_seqs'] <= 192:
                                                    return (128, 3, 2)
                                                else:
                                                    return (128, 2, 0)
                                            else:
                                                return (128, 3, 2)
                                        else:
                                            return (128, 3, 2)
                                    else:
                                        if f['max_seqlen_k'] <= 20480:
                                            if f['group'] <= 2:
                                                return (128, 2, 0)
                                            else:
                                                if f['num_tokens'] <= 384:
                                                    if f['group'] <= 6:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['num_tokens'] <= 192:
                                                            return (128, 2, 0)
                                                        else:
                                                            return (128, 3, 2)
                                                else:
                                                    if f['num_seqs'] <= 192:
                                                        if f['max_seqlen_q'] <= 6:
                                                            if f['group'] <= 6:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (128, 3, 2)
                                                        else:
                                                            return (128, 3, 2)
                                                    else:
                                                        return (128, 3, 2)
                                        else:
                                            return (128, 3, 2)
                                else:
                                    if f['block_size'] <= 40:
                                        if f['group'] <= 2:
                                            if f['num_seqs'] <= 192:
                                                return 'hand'
                                            else:
                                                if f['num_tokens'] <= 768:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['max_seqlen_q'] <= 6:
                                                        return 'hand'
                                                    else:
                                                        return (128, 2, 0)
                                        else:
                                            if f['max_seqlen_q'] <= 1:
                                                return (64, 3, 0)
                                            else:
                                                if f['num_seqs'] <= 192:
                                                    return (128, 3, 0)
                                                else:
                                                    if f['max_seqlen_q'] <= 3:
                                                        return (64, 3, 0)
                                                    else:
                                                        if f['num_tokens'] <= 1536:
                                                            if f['group'] <= 6:
                                                                return (64, 3, 0)
                                                            else:
                                                                return (128, 3, 0)
                                                        else:
                                                            return (128, 3, 0)
                                    else:
                                        if f['group'] <= 2:
                                            if f['max_seqlen_q'] <= 1:
                                                if f['programs'] <= 1536:
                                                    return (64, 3, 0)
                                                else:
                                                    return 'hand'
                                            else:
                                                return (64, 3, 0)
                                        else:
                                            return (64, 3, 0)
                else:
                    if f['max_seqlen_q'] <= 1:
                        if f['max_seqlen_k'] <= 896:
                            if f['max_seqlen_k'] <= 576:
                                if f['num_seqs'] <= 96:
                                    if f['programs'] <= 384:
                                        if f['group'] <= 2:
                                            if f['block_size'] <= 40:
                                                return (128, 2, 0)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    return (128, 2, 0)
                                                else:
                                                    return (64, 2, 0)
                                        else:
                                            return (128, 2, 0)
                                    else:
                                        if f['kv_bits'] <= 12:
                                            if f['block_size'] <= 40:
                                                if f['group'] <= 2:
                                                    return (128, 2, 1)
                                                else:
                                                    return (128, 2, 0)
                                            else:
                                                if f['group'] <= 2:
                                                    return (128, 2, 2)
                                                else:
                                                    return (128, 2, 0)
                                        else:
                                            if f['group'] <= 2:
                                                return (32, 2, 0)
                                            else:
                                                if f['group'] <= 6:
                                                    if f['block_size'] <= 40:
                                                        return (32, 2, 2)
                                                    else:
                                                        return (32, 2, 0)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (32, 2, 0)
                                                    else:
                                                        return (32, 2, 2)
                                else:
                                    if f['block_size'] <= 40:
                                        if f['num_tokens'] <= 192:
                                            if f['programs'] <= 640:
                                                return (128, 2, 0)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['group'] <= 2:
                                                        return (32, 2, 0)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (32, 2, 4)
                                                        else:
                                                            return (32, 2, 0)
                                        else:
                                            if f['group'] <= 6:
                                                if f['programs'] <= 1280:
                                                    if f['kv_bits'] <= 12:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['num_kv_heads'] <= 1:
                                                            if f['group'] <= 2:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (128, 2, 1)
                                                        else:
                                                            return (32, 2, 0)
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        if f['group'] <= 2:
                                                            return (128, 2, 1)
                                                        else:
                                                            return (128, 2, 0)
                                                    else:
                                                        return 'hand'
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['num_kv_heads'] <= 1:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['num_kv_heads'] <= 5:
                                                            return (32, 2, 0)
                                                        else:
                                                            return 'hand'
                                    else:
                                        if f['kv_bits'] <= 12:
                                            return (128, 2, 0)
                                        else:
                                            if f['programs'] <= 384:
                                                if f['group'] <= 2:
                                                    return (64, 2, 0)
                                                else:
                                                    return (128, 2, 0)
                                            else:
                                                return (32, 2, 0)
                            else:
                                return (32, 2, 0)
                        else:
                            if f['max_seqlen_k'] <= 1536:
                                if f['block_size'] <= 40:
                                    return (128, 2, 1)
                                else:
                                    return (64, 3, 4)
                            else:
                                if f['kv_bits'] <= 12:
                                    if f['max_seqlen_k'] <= 20480:
                                        if f['programs'] <= 1536:
                                            if f['programs'] <= 384:
                                                if f['max_seqlen_k'] <= 5120:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        if f['group'] <= 2:
                                                            return (128, 2, 0)
                                                        else:
                                                            if f['num_seqs'] <= 192:
                                                                return 'hand'
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return (128, 2, 0)
                                                                else:
                                                                    return 'hand'
                                                    else:
                                                        return (128, 2, 0)
                                            else:
                                                if f['num_seqs'] <= 96:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['num_tokens'] <= 192:
                                                            if f['max_seqlen_k'] <= 5120:
                                                                return (128, 2, 0)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 2, 1)
                                                                else:
                                                                    return (128, 2, 0)
                                                        else:
                                                            return (128, 2, 0)
                                                    else:
                                                        if f['programs'] <= 768:
                                                            if f['max_seqlen_k'] <= 5120:
                                                                if f['group'] <= 6:
                                                                    return (128, 2, 0)
                                                                else:
                                                                    if f['block_size'] <= 40:
                                                                        return (128, 2, 0)
                                                                    else:
                                                                        return (128, 2, 1)
                                                            else:
                                                                return (128, 2, 0)
                                                        else:
                                                            return (128, 2, 0)
                                        else:
                                            return (128, 2, 0)
                                    else:
                                        if f['programs'] <= 384:
                                            if f['num_tokens'] <= 192:
                                                if f['block_size'] <= 40:
                                                    if f['group'] <= 2:
                                                        return (128, 2, 0)
                                                    else:
                                                        return 'hand'
                                                else:
                                                    return (128, 2, 0)
                                            else:
                                                if f['group'] <= 2:
                                                    if f['block_size'] <= 40:
                                                        return (128, 2, 0)
                                                    else:
                                                        return 'hand'
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return 'hand'
                                                    else:
                                                        return (128, 2, 0)
                                        else:
                                            if f['num_seqs'] <= 160:
                                                if f['block_size'] <= 40:
                                                    return (128, 3, 0)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (128, 2, 0)
                                                    else:
                                                        return (128, 3, 0)
                                            else:
                                                if f['block_size'] <= 40:
                                                    if f['group'] <= 2:
                                                        return (128, 3, 0)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (128, 3, 2)
                                                        else:
                                                            return (128, 3, 0)
                                                else:
                                                    return (128, 3, 0)
                                else:
                                    if f['max_seqlen_k'] <= 5120:
                                        if f['block_size'] <= 40:
                                            if f['num_tokens'] <= 96:
                                                if f['num_tokens'] <= 48:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['group'] <= 2:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (128, 2, 2)
                                                        else:
                                                            return (128, 2, 0)
                                            else:
                                                return (128, 2, 0)
                                        else:
                                            if f['num_tokens'] <= 192:
                                                if f['group'] <= 2:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['num_tokens'] <= 48:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['group'] <= 6:
                                                            if f['programs'] <= 768:
                                                                return (128, 2, 1)
                                                            else:
                                                                return (128, 2, 0)
                                                        else:
                                                            if f['programs'] <= 768:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (128, 2, 1)
                                            else:
                                                return (128, 2, 0)
                                    else:
                                        if f['block_size'] <= 40:
                                            if f['programs'] <= 768:
                                                if f['programs'] <= 384:
                                                    if f['max_seqlen_k'] <= 20480:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['num_seqs'] <= 80:
                                                            return 'hand'
                                                        else:
                                                            if f['num_kv_heads'] <= 1:
                                                                return (64, 3, 8)
                                                            else:
                                                                if f['group'] <= 2:
                                                                    return (64, 3, 8)
                                                                else:
                                                                    if f['group'] <= 6:
                                                                        return 'hand'
                                                                    else:
                                                                        return (64, 3, 8)
                                                else:
                                                    if f['group'] <= 2:
                                                        if f['num_tokens'] <= 160:
                                                            return (128, 2, 1)
                                                        else:
                                                            return (128, 2, 0)
                                                    else:
                                                        return (128, 2, 0)
                                            else:
                                                if f['group'] <= 2:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (128, 2, 4)
                                                    else:
                                                        return (128, 2, 0)
                                        else:
                                            if f['programs'] <= 384:
                                                if f['group'] <= 6:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['max_seqlen_k'] <= 20480:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['num_seqs'] <= 80:
                                                            return 'hand'
                                                        else:
                                                            if f['num_kv_heads'] <= 1:
                                                                return (64, 3, 8)
                                                            else:
                                                                return (128, 2, 0)
                                            else:
                                                if f['num_seqs'] <= 192:
                                                    if f['group'] <= 2:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['num_tokens'] <= 96:
                                                            if f['group'] <= 6:
                                                                return (128, 2, 0)
                                                            else:
                                                                return (128, 2, 2)
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (128, 2, 2)
                                                            else:
                                                                return (128, 2, 0)
                                                else:
                                                    return (128, 2, 0)
                    else:
                        if f['max_seqlen_k'] <= 20480:
                            if f['max_seqlen_k'] <= 1280:
                                if f['kv_bits'] <= 12:
                                    if f['num_kv_heads'] <= 1:
                                        if f['group'] <= 6:
                                            return (128, 2, 0)
                                        else:
                                            if f['num_tokens'] <= 768:
                                                if f['block_size'] <= 40:
                                                    return (128, 2, 0)
                                                else:
                                                    return (128, 2, 1)
                                            else:
                                                return (128, 2, 0)
                                    else:
                                        return (128, 2, 0)
                                else:
                                    if f['programs'] <= 384:
                                        if f['block_size'] <= 40:
                                            return (128, 2, 0)
                                        else:
                                            if f['num_tokens'] <= 1536:
                                                if f['group'] <= 2:
                                                    if f['max_seqlen_q'] <= 3:
                                                        if f['num_tokens'] <= 160:
                                                            return (128, 2, 0)
                                                        else:
                                                            return (64, 2, 0)
                                                    else:
                                                        return (128, 2, 0)
                                                else:
                                                    return (128, 2, 0)
                                            else:
                                                if f['group'] <= 6:
                                                    return (128, 2, 0)
                                                else:
                                                    return (64, 2, 0)
                                    else:
                                        if f['programs'] <= 1536:
                                            if f['block_size'] <= 40:
                                                if f['num_seqs'] <= 96:
                                                    if f['group'] <= 2:
                                                        return (32, 2, 0)
                                                    else:
                                                        if f['num_tokens'] <= 192:
                                                            return (32, 2, 0)
                                                        else:
                                                            if f['max_seqlen_q'] <= 6:
                                                                if f['group'] <= 6:
                                                                    return (32, 2, 0)
                                                                else:
                                                                    return (128, 2, 0)
                                                            else:
                                                                if f['group'] <= 6:
                                                                    return (128, 2, 0)
                                                                else:
                                                                    return (32, 2, 0)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (32, 2, 0)
                                                    else:
                                                        if f['num_seqs'] <= 192:
                                                            return (32, 2, 0)
                                                        else:
                                                            if f['num_tokens'] <= 768:
                                                                return (32, 2, 0)
                                                            else:
                                                                if f['num_tokens'] <= 1536:
                                                                    return (128, 2, 0)
                                                                else:
                                                                    return (32, 2, 0)
                                            else:
                                                return (32, 2, 0)
                                        else:
                                            if f['block_size'] <= 40:
                                                if f['group'] <= 6:
                                                    return 'hand'
                                                else:
                                                    if f['max_seqlen_q'] <= 3:
                                                        return (32, 2, 0)
                                                    else:
                                                        return 'hand'
                                            else:
                                                if f['group'] <= 2:
                                                    return (32, 2, 0)
                                                else:
                                                    if f['max_seqlen_q'] <= 3:
                                                        return (32, 2, 0)
                                                    else:
                                                        if f['group'] <= 6:
                                                            if f['max_seqlen_q'] <= 6:
                                                                return (32, 2, 0)
                                                            else:
                                                                return (64, 3, 0)
                                                        else:
                                                            return (64, 3, 0)
                            else:
                                if f['block_size'] <= 40:
                                    if f['max_seqlen_k'] <= 5120:
                                        if f['num_tokens'] <= 1536:
                                            return (128, 2, 0)
                                        else:
                                            if f['programs'] <= 1280:
                                                return (128, 2, 0)
                                            else:
                                                if f['group'] <= 6:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        return (128, 2, 0)
                                                    else:
                                                        return (64, 3, 0)
                                    else:
                                        if f['kv_bits'] <= 12:
                                            if f['programs'] <= 384:
                                                if f['group'] <= 2:
                                                    if f['max_seqlen_q'] <= 3:
                                                        if f['num_seqs'] <= 80:
                                                            return 'hand'
                                                        else:
                                                            if f['num_kv_heads'] <= 1:
                                                                return 'hand'
                                                            else:
                                                                return (128, 2, 0)
                                                    else:
                                                        return (128, 2, 0)
                                                else:
                                                    if f['num_tokens'] <= 192:
                                                        if f['num_tokens'] <= 96:
                                                            if f['group'] <= 6:
                                                                return 'hand'
                                                            else:
                                                                return (128, 2, 0)
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (128, 2, 0)
                                                            else:
                                                                return 'hand'
                                                    else:
                                                        return 'hand'
                                            else:
                                                if f['group'] <= 6:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['programs'] <= 768:
                                                        if f['max_seqlen_q'] <= 3:
                                                            return (128, 2, 0)
                                                        else:
                                                            return (128, 3, 0)
                                                    else:
                                                        return (128, 2, 0)
                                        else:
                                            if f['programs'] <= 768:
                                                return (128, 2, 0)
                                            else:
                                                if f['group'] <= 6:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['max_seqlen_q'] <= 6:
                                                        return (128, 2, 0)
                                                    else:
                                                        return (64, 3, 0)
                                else:
                                    if f['programs'] <= 768:
                                        return (128, 2, 0)
                                    else:
                                        if f['group'] <= 6:
                                            return (128, 2, 0)
                                        else:
                                            if f['max_seqlen_q'] <= 6:
                                                return (128, 2, 0)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['max_seqlen_k'] <= 5120:
                                                        return (64, 3, 0)
                                                    else:
                                                        return (128, 2, 0)
                        else:
                            if f['programs'] <= 384:
                                if f['block_size'] <= 40:
                                    if f['kv_bits'] <= 12:
                                        return 'hand'
                                    else:
                                        if f['max_seqlen_q'] <= 3:
                                            if f['num_seqs'] <= 80:
                                                return 'hand'
                                            else:
                                                if f['group'] <= 6:
                                                    if f['group'] <= 2:
                                                        return (64, 3, 8)
                                                    else:
                                                        if f['num_tokens'] <= 384:
                                                            return (64, 3, 8)
                                                        else:
                                                            return 'hand'
                                                else:
                                                    return (128, 2, 0)
                                        else:
                                            if f['num_seqs'] <= 80:
                                                if f['group'] <= 6:
                                                    return (128, 2, 0)
                                                else:
                                                    return 'hand'
                                            else:
                                                return (128, 2, 0)
                                else:
                                    if f['num_tokens'] <= 96:
                                        if f['group'] <= 6:
                                            return (128, 2, 0)
                                        else:
                                            if f['kv_bits'] <= 12:
                                                return (128, 2, 0)
                                            else:
                                                return 'hand'
                                    else:
                                        if f['max_seqlen_q'] <= 3:
                                            if f['group'] <= 2:
                                                if f['num_kv_heads'] <= 1:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        return (128, 2, 0)
                                                    else:
                                                        return (64, 3, 8)
                                            else:
                                                return (128, 2, 0)
                                        else:
                                            return (128, 2, 0)
                            else:
                                if f['group'] <= 2:
                                    if f['num_kv_heads'] <= 5:
                                        if f['num_tokens'] <= 1536:
                                            return (128, 3, 0)
                                        else:
                                            if f['block_size'] <= 40:
                                                return (128, 3, 0)
                                            else:
                                                return (128, 2, 0)
                                    else:
                                        if f['block_size'] <= 40:
                                            if f['max_seqlen_q'] <= 6:
                                                return (128, 3, 0)
                                            else:
                                                return (128, 2, 0)
                                        else:
                                            return (128, 2, 0)
                                else:
                                    if f['num_tokens'] <= 192:
                                        if f['block_size'] <= 40:
                                            return (128, 3, 0)
                                        else:
                                            if f['group'] <= 6:
                                                return (128, 2, 0)
                                            else:
                                                return (128, 3, 0)
                                    else:
                                        return (128, 3, 0)
            else:
                if f['max_seqlen_k'] <= 1280:
                    if f['programs'] <= 768:
                        if f['kv_bits'] <= 12:
                            if f['max_seqlen_q'] <= 1:
                                if f['group'] <= 2:
                                    return 'hand'
                                else:
                                    if f['block_size'] <= 40:
                                        if f['num_seqs'] <= 192:
                                            return (64, 2, 0)
                                        else:
                                            if f['programs'] <= 384:
                                                return (64, 2, 0)
                                            else:
                                                return 'hand'
                                    else:
                                        if f['num_seqs'] <= 48:
                                            return 'hand'
                                        else:
                                            if f['num_seqs'] <= 192:
                                                if f['num_kv_heads'] <= 5:
                                                    return (64, 2, 0)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (64, 2, 0)
                                                    else:
                                                        return 'hand'
                                            else:
                                                if f['num_kv_heads'] <= 1:
                                                    if f['group'] <= 6:
                                                        return 'hand'
                                                    else:
                                                        return (64, 2, 0)
                                                else:
                                                    return 'hand'
                            else:
                                if f['num_tokens'] <= 96:
                                    if f['block_size'] <= 40:
                                        if f['group'] <= 2:
                                            return 'hand'
                                        else:
                                            return (64, 2, 0)
                                    else:
                                        return 'hand'
                                else:
                                    if f['max_seqlen_q'] <= 3:
                                        if f['block_size'] <= 40:
                                            if f['num_tokens'] <= 384:
                                                if f['programs'] <= 384:
                                                    if f['group'] <= 2:
                                                        return 'hand'
                                                    else:
                                                        return (64, 2, 0)
                                                else:
                                                    return 'hand'
                                            else:
                                                return 'hand'
                                        else:
                                            return 'hand'
                                    else:
                                        return 'hand'
                        else:
                            if f['max_seqlen_q'] <= 1:
                                if f['block_size'] <= 40:
                                    if f['programs'] <= 384:
                                        if f['num_seqs'] <= 80:
                                            return (64, 2, 0)
                                        else:
                                            if f['group'] <= 2:
                                                return (64, 2, 0)
                                            else:
                                                if f['num_kv_heads'] <= 1:
                                                    if f['group'] <= 6:
                                                        return (64, 2, 0)
                                                    else:
                                                        return (64, 2, 1)
                                                else:
                                                    if f['group'] <= 6:
                                                        return (64, 2, 1)
                                                    else:
                                                        return (64, 2, 0)
                                    else:
                                        return (64, 2, 0)
                                else:
                                    return (64, 2, 0)
                            else:
                                if f['programs'] <= 384:
                                    return (64, 2, 0)
                                else:
                                    if f['block_size'] <= 40:
                                        if f['group'] <= 6:
                                            return (64, 2, 0)
                                        else:
                                            if f['max_seqlen_q'] <= 6:
                                                return (64, 2, 0)
                                            else:
                                                return 'hand'
                                    else:
                                        if f['num_seqs'] <= 160:
                                            if f['group'] <= 2:
                                                if f['num_tokens'] <= 192:
                                                    return 'hand'
                                                else:
                                                    if f['max_seqlen_q'] <= 6:
                                                        return (64, 2, 0)
                                                    else:
                                                        return 'hand'
                                            else:
                                                return 'hand'
                                        else:
                                            if f['max_seqlen_q'] <= 6:
                                                return (64, 2, 0)
                                            else:
                                                if f['group'] <= 2:
                                                    return (64, 2, 0)
                                                else:
                                                    return 'hand'
                    else:
                        if f['block_size'] <= 40:
                            if f['kv_bits'] <= 12:
                                return 'hand'
                            else:
                                if f['num_seqs'] <= 192:
                                    return 'hand'
                                else:
                                    if f['group'] <= 6:
                                        if f['group'] <= 2:
                                            return 'hand'
                                        else:
                                            if f['max_seqlen_q'] <= 3:
                                                if f['max_seqlen_q'] <= 1:
                                                    return 'hand'
                                                else:
                                                    return (64, 2, 0)
                                            else:
                                                return 'hand'
                                    else:
                                        if f['max_seqlen_q'] <= 6:
                                            return (64, 2, 0)
                                        else:
                                            return 'hand'
                        else:
                            return 'hand'
                else:
                    if f['kv_bits'] <= 12:
                        if f['max_seqlen_k'] <= 5120:
                            if f['group'] <= 2:
                                if f['max_seqlen_q'] <= 3:
                                    if f['programs'] <= 1536:
                                        if f['num_tokens'] <= 192:
                                            if f['num_kv_heads'] <= 5:
                                                if f['block_size'] <= 40:
                                                    return (128, 2, 1)
                                                else:
                                                    return (128, 2, 0)
                                            else:
                                                if f['block_size'] <= 40:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        if f['num_tokens'] <= 48:
                                                            return (128, 2, 0)
                                                        else:
                                                            if f['programs'] <= 768:
                                                                return (64, 2, 0)
                                                            else:
                                                                return (128, 2, 0)
                                                    else:
                                                        return (64, 2, 0)
                                        else:
                                            if f['block_size'] <= 40:
                                                return (128, 2, 0)
                                            else:
                                                if f['num_kv_heads'] <= 1:
                                                    return (128, 2, 0)
                                                else:
                                                    if f['max_seqlen_q'] <= 1:
                                                        return (128, 2, 0)
                                                    else:
                                                        if f['num_kv_heads'] <= 5:
                                                            return (64, 2, 0)
                                                        else:
                                                            return (128, 2, 0)
                                    else:
                                        if f['block_size'] <= 40:
                                            if f['num_tokens'] <= 384:
                                                return (128, 2, 8)
                                            else:
                                                return (128, 2, 0)
                                        else:
                                            return (128, 2, 0)
                                else:
                                    if f['programs'] <= 1536:
                                        if f['programs'] <= 768:
                                            return (64, 2, 0)
                                        else:
                                            if f['num_tokens'] <= 768:
                                                if f['block_size'] <= 40:
                                                    return (128, 2, 0)
                                                else:
                                                    return (64, 2, 0)
                                            else:
                                                return (64, 2, 0)
                                    else:
                                        return (128, 2, 0)
                            else:
                                if f['num_kv_heads'] <= 1:
                                    if f['max_seqlen_q'] <= 1:
                                        if f['block_size'] <= 40:
                                            if f['group'] <= 6:
                                                return (64, 2, 0)
                                            else:
                                                return (64, 2, 1)
                                        else:
                                            return (64, 2, 0)
                                    else:
                                        return (64, 2, 0)
                                else:
                                    if f['programs'] <= 768:
                                        return (64, 2, 0)
                                    else:
                                        if f['max_seqlen_q'] <= 3:
                                            if f['num_tokens'] <= 384:
                                                return (64, 2, 0)
                                            else:
                                                if f['group'] <= 6:
                                                    if f['block_size'] <= 40:
                                                        return (64, 2, 0)
                                                    else:
                                                        return (128, 2, 0)
                                                else:
                                                    return (64, 2, 0)
                                        else:
                                            if f['max_seqlen_q'] <= 6:
                                                if f['group'] <= 6:
                                                    if f['num_seqs'] <= 192:
                                                        return (64, 2, 0)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (64, 2, 0)
                                                        else:
                                                            return (64, 3, 0)
                                                else:
                                                    return (64, 3, 0)
                                            else:
                                                return (64, 3, 0)
                        else:
                            if f['num_tokens'] <= 96:
                                if f['num_seqs'] <= 48:
                                    if f['group'] <= 2:
                                        if f['num_tokens'] <= 48:
                                            if f['max_seqlen_k'] <= 20480:
                                                if f['block_size'] <= 40:
                                                    return (64, 3, 0)
                                                else:
                                                    return (64, 3, 1)
                                            else:
                                                if f['block_size'] <= 40:
                                                    return (128, 2, 0)
                                                else:
                                                    return (64, 3, 0)
                                        else:
                                            return (64, 3, 0)
                                    else:
                                        if f['block_size'] <= 40:
                                            if f['max_seqlen_k'] <= 20480:
                                                if f['max_seqlen_q'] <= 1:
                                                    if f['group'] <= 6:
                                                        return (64, 2, 0)
                                                    else:
                                                        return (64, 3, 0)
                                                else:
                                                    return (64, 3, 0)
                                            else:
                                                return (64, 2, 0)
                                        else:
                                            return (64, 3, 0)
                                else:
                                    if f['block_size'] <= 40:
                                        if f['group'] <= 2:
                                            return (64, 2, 0)
                                        else:
                                            if f['group'] <= 6:
                                                return (64, 2, 1)
                                            else:
                                                return (64, 2, 0)
                                    else:
                                        if f['group'] <= 6:
                                            return (64, 2, 0)
                                        else:
                                            return (64, 3, 0)
                            else:
                                if f['programs'] <= 768:
                                    if f['programs'] <= 384:
                                        if f['max_seqlen_q'] <= 3:
                                            if f['num_tokens'] <= 384:
                                                if f['block_size'] <= 40:
                                                    if f['group'] <= 2:
                                                        if f['max_seqlen_q'] <= 1:
                                                            return (128, 2, 0)
                                                        else:
                                                            return (64, 3, 0)
                                                    else:
                                                        if f['num_tokens'] <= 192:
                                                            if f['max_seqlen_k'] <= 20480:
                                                                return (64, 3, 0)
                                                            else:
                                                                return (64, 2, 0)
                                                        else:
                                                            return (64, 3, 0)
                                                else:
                                                    return (64, 3, 0)
                                            else:
                                                if f['group'] <= 6:
                                                    return (64, 3, 0)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (64, 3, 0)
                                                    else:
                                                        if f['max_seqlen_k'] <= 20480:
                                                            return (64, 3, 1)
                                                        else:
                                                            return (64, 3, 0)
                                        else:
                                            return (64, 3, 0)
                                    else:
                                        if f['block_size'] <= 40:
                                            if f['group'] <= 6:
                                                if f['max_seqlen_q'] <= 1:
                                                    if f['group'] <= 2:
                                                        return (128, 2, 0)
                                                    else:
                                                        return (64, 2, 0)
                                                else:
                                                    if f['num_tokens'] <= 1536:
                                                        return (64, 2, 0)
                                                    else:
                                                        if f['group'] <= 2:
                                                            return (64, 2, 0)
                                                        else:
                                                            return (64, 3, 0)
                                            else:
                                                if f['max_seqlen_q'] <= 3:
                                                    if f['num_tokens'] <= 384:
                                                        return (64, 2, 0)
                                                    else:
                                                        return (64, 3, 0)
                                                else:
                                                    return (64, 3, 0)
                                        else:
                                            if f['group'] <= 2:
                                                if f['num_seqs'] <= 160:
                                                    if f['num_tokens'] <= 384:
                                                        return (64, 2, 0)
                                                    else:
                                                        return (64, 3, 0)
                                                else:
                                                    return (64, 3, 0)
                                            else:
                                                return (64, 3, 0)
                                else:
                                    if f['num_tokens'] <= 768:
                                        if f['block_size'] <= 40:
                                            if f['num_tokens'] <= 192:
                                                if f['group'] <= 2:
                                                    return (128, 2, 0)
                                                else:
                                                    return (64, 2, 4)
                                            else:
                                                if f['group'] <= 2:
                                                    return (64, 2, 4)
                                                else:
                                                    if f['group'] <= 6:
                                                        if f['num_tokens'] <= 384:
                                                            return (64, 2, 4)
                                                        else:
                                                            return (64, 3, 0)
                                                    else:
                                                        return (64, 3, 0)
                                        else:
                                            return (64, 3, 0)
                                    else:
                                        if f['block_size'] <= 40:
                                            if f['group'] <= 2:
                                                return (64, 2, 4)
                                            else:
                                                return (64, 3, 0)
                                        else:
                                            if f['group'] <= 2:
                                                return (64, 3, 0)
                                            else:
                                                if f['group'] <= 6:
                                                    return (64, 3, 1)
                                                else:
                                                    return (64, 3, 0)
                    else:
                        if f['max_seqlen_q'] <= 6:
                            return (64, 2, 0)
                        else:
                            if f['group'] <= 2:
                                if f['block_size'] <= 40:
                                    return (64, 2, 0)
                                else:
                                    if f['num_kv_heads'] <= 5:
                                        if f['num_kv_heads'] <= 1:
                                            return (64, 2, 0)
                                        else:
                                            if f['max_seqlen_k'] <= 5120:
                                                if f['num_tokens'] <= 1536:
                                                    return (64, 2, 0)
                                                else:
                                                    return (64, 2, 1)
                                            else:
                                                if f['num_tokens'] <= 1536:
                                                    return (64, 2, 1)
                                                else:
                                                    return (64, 2, 0)
                                    else:
                                        return (64, 2, 0)
                            else:
                                return (64, 2, 0)


def prefill(f):
    if f['head_dim'] <= 192:
        if f['max_seqlen_k'] <= 1536:
            if f['head_dim'] <= 96:
                if f['programs'] <= 192:
                    if f['max_seqlen_q'] <= 384:
                        if f['programs'] <= 96:
                            if f['kv_bits'] <= 12:
                                if f['programs'] <= 48:
                                    if f['num_kv_heads'] <= 5:
                                        if f['max_seqlen_q'] <= 192:
                                            if f['programs'] <= 24:
                                                if f['block_size'] <= 40:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    return (64, 128, 4, 2)
                                            else:
                                                return (64, 64, 4, 2)
                                        else:
                                            if f['num_tokens'] <= 1536:
                                                return (64, 64, 4, 3)
                                            else:
                                                if f['programs'] <= 24:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    return (64, 64, 4, 3)
                                    else:
                                        if f['num_seqs'] <= 1:
                                            return (64, 128, 4, 2)
                                        else:
                                            if f['block_size'] <= 40:
                                                return (64, 64, 4, 2)
                                            else:
                                                return (64, 128, 4, 2)
                                else:
                                    if f['group'] <= 6:
                                        return (64, 64, 4, 2)
                                    else:
                                        return (64, 128, 4, 2)
                            else:
                                if f['num_tokens'] <= 3072:
                                    if f['num_tokens'] <= 768:
                                        if f['group'] <= 6:
                                            return (64, 64, 4, 2)
                                        else:
                                            if f['num_tokens'] <= 384:
                                                return (64, 64, 4, 2)
                                            else:
                                                if f['programs'] <= 48:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        return (64, 64, 4, 2)
                                    else:
                                        if f['programs'] <= 24:
                                            if f['num_tokens'] <= 1536:
                                                return (64, 64, 4, 2)
                                            else:
                                                if f['block_size'] <= 40:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    return (64, 128, 4, 2)
                                        else:
                                            if f['block_size'] <= 40:
                                                if f['num_seqs'] <= 6:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    if f['programs'] <= 48:
                                                        return (64, 64, 4, 2)
                                                    else:
                                                        return (64, 128, 4, 2)
                                            else:
                                                if f['num_tokens'] <= 1536:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    return (64, 128, 4, 2)
                                else:
                                    if f['programs'] <= 48:
                                        if f['block_size'] <= 40:
                                            return (64, 64, 4, 2)
                                        else:
                                            return (64, 128, 4, 2)
                                    else:
                                        if f['block_size'] <= 40:
                                            return (128, 64, 8, 2)
                                        else:
                                            return (128, 128, 8, 2)
                        else:
                            if f['num_tokens'] <= 255:
                                if f['block_size'] <= 40:
                                    if f['kv_bits'] <= 12:
                                        return (64, 128, 4, 2)
                                    else:
                                        return (64, 64, 4, 2)
                                else:
                                    if f['group'] <= 2:
                                        if f['kv_bits'] <= 12:
                                            return (64, 128, 4, 2)
                                        else:
                                            return (64, 64, 4, 2)
                                    else:
                                        if f['num_seqs'] <= 20:
                                            if f['kv_bits'] <= 12:
                                                return (64, 128, 4, 2)
                                            else:
                                                return (64, 64, 4, 2)
                                        else:
                                            return (64, 64, 4, 2)
                            else:
                                return (64, 128, 4, 2)
                    else:
                        return (64, 128, 4, 2)
                else:
                    if f['num_tokens'] <= 831:
                        if f['max_seqlen_q'] <= 192:
                            if f['num_kv_heads'] <= 1:
                                if f['kv_bits'] <= 12:
                                    return (64, 128, 4, 2)
                                else:
                                    return (64, 64, 4, 2)
                            else:
                                return (64, 64, 4, 2)
                        else:
                            if f['programs'] <= 6144:
                                if f['max_seqlen_q'] <= 384:
                                    if f['kv_bits'] <= 12:
                                        if f['block_size'] <= 40:
                                            return (128, 64, 4, 2)
                                        else:
                                            return (64, 64, 4, 2)
                                    else:
                                        if f['block_size'] <= 40:
                                            return (128, 64, 8, 2)
                                        else:
                                            return (128, 64, 4, 2)
                                else:
                                    if f['programs'] <= 768:
                                        if f['num_tokens'] <= 515:
                                            if f['kv_bits'] <= 12:
                                                return (64, 64, 4, 2)
                                            else:
                                                return (128, 64, 4, 2)
                                        else:
                                            if f['num_tokens'] <= 591:
                                                if f['kv_bits'] <= 12:
                                                    if f['group'] <= 6:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        if f['num_kv_heads'] <= 1:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (64, 128, 4, 2)
                                                            else:
                                                                return (64, 64, 4, 2)
                                                else:
                                                    return (64, 128, 4, 2)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    return (64, 64, 4, 2)
                                    else:
                                        if f['num_seqs'] <= 20:
                                            return (64, 64, 4, 2)
                                        else:
                                            if f['kv_bits'] <= 12:
                                                if f['group'] <= 2:
                                                    if f['num_kv_heads'] <= 5:
                                                        return (64, 64, 4, 2)
                                                    else:
                                                        if f['num_seqs'] <= 80:
                                                            if f['block_size'] <= 40:
                                                                return (64, 128, 4, 2)
                                                            else:
                                                                return (64, 64, 4, 3)
                                                        else:
                                                            return (64, 64, 4, 3)
                                                else:
                                                    return (64, 128, 4, 2)
                                            else:
                                                if f['num_kv_heads'] <= 5:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    if f['group'] <= 2:
                                                        return (64, 64, 4, 3)
                                                    else:
                                                        return (64, 64, 4, 2)
                            else:
                                if f['num_kv_heads'] <= 5:
                                    if f['kv_bits'] <= 12:
                                        if f['block_size'] <= 40:
                                            return (64, 128, 4, 2)
                                        else:
                                            return (64, 64, 4, 3)
                                    else:
                                        return (64, 64, 4, 2)
                                else:
                                    if f['num_tokens'] <= 591:
                                        if f['kv_bits'] <= 12:
                                            return (64, 64, 4, 3)
                                        else:
                                            if f['block_size'] <= 40:
                                                return (64, 64, 4, 3)
                                            else:
                                                return (64, 64, 4, 2)
                                    else:
                                        return (64, 64, 4, 3)
                    else:
                        if f['num_kv_heads'] <= 5:
                            if f['kv_bits'] <= 12:
                                if f['programs'] <= 1536:
                                    if f['group'] <= 2:
                                        if f['block_size'] <= 40:
                                            return (64, 64, 4, 2)
                                        else:
                                            return (64, 64, 4, 3)
                                    else:
                                        if f['num_seqs'] <= 6:
                                            return (64, 64, 4, 2)
                                        else:
                                            if f['num_tokens'] <= 3072:
                                                if f['block_size'] <= 40:
                                                    return (128, 64, 4, 2)
                                                else:
                                                    return (64, 64, 4, 2)
                                            else:
                                                if f['programs'] <= 384:
                                                    if f['block_size'] <= 40:
                                                        if f['max_seqlen_q'] <= 384:
                                                            return (64, 64, 4, 2)
                                                        else:
                                                            if f['group'] <= 6:
                                                                if f['max_seqlen_q'] <= 768:
                                                                    return (128, 64, 4, 2)
                                                                else:
                                                                    return (64, 64, 4, 2)
                                                            else:
                                                                return (64, 64, 4, 2)
                                                    else:
                                                        return (64, 64, 4, 2)
                                                else:
                                                    if f['num_tokens'] <= 12288:
                                                        return (64, 64, 4, 2)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (64, 64, 4, 2)
                                                        else:
                                                            return (128, 64, 4, 2)
                                else:
                                    return (128, 64, 4, 2)
                            else:
                                if f['num_seqs'] <= 6:
                                    if f['max_seqlen_k'] <= 768:
                                        return (128, 64, 4, 2)
                                    else:
                                        if f['programs'] <= 384:
                                            if f['block_size'] <= 40:
                                                if f['group'] <= 6:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    return (64, 128, 4, 2)
                                            else:
                                                return (64, 64, 4, 2)
                                        else:
                                            return (64, 64, 4, 2)
                                else:
                                    if f['num_tokens'] <= 3072:
                                        if f['block_size'] <= 40:
                                            return (128, 64, 8, 2)
                                        else:
                                            return (128, 64, 4, 2)
                                    else:
                                        if f['block_size'] <= 40:
                                            if f['max_seqlen_q'] <= 768:
                                                if f['max_seqlen_q'] <= 384:
                                                    if f['group'] <= 6:
                                                        return (128, 64, 4, 2)
                                                    else:
                                                        return (128, 64, 8, 2)
                                                else:
                                                    return (128, 64, 4, 2)
                                            else:
                                                if f['programs'] <= 768:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    return (128, 64, 8, 3)
                                        else:
                                            if f['group'] <= 6:
                                                if f['max_seqlen_k'] <= 768:
                                                    return (128, 64, 4, 2)
                                                else:
                                                    if f['programs'] <= 768:
                                                        return (64, 64, 4, 2)
                                                    else:
                                                        return (128, 64, 4, 2)
                                            else:
                                                if f['num_seqs'] <= 12:
                                                    if f['max_seqlen_k'] <= 768:
                                                        return (128, 64, 4, 2)
                                                    else:
                                                        if f['num_kv_heads'] <= 1:
                                                            return (64, 64, 4, 2)
                                                        else:
                                                            return (128, 64, 4, 2)
                                                else:
                                                    return (128, 64, 4, 2)
                        else:
                            if f['num_tokens'] <= 12288:
                                if f['max_seqlen_k'] <= 768:
                                    if f['kv_bits'] <= 12:
                                        if f['block_size'] <= 40:
                                            if f['programs'] <= 384:
                                                if f['num_tokens'] <= 2560:
                                                    if f['max_seqlen_k'] <= 384:
                                                        return (64, 64, 4, 2)
                                                    else:
                                                        return (128, 64, 4, 2)
                                                else:
                                                    return (128, 64, 4, 2)
                                            else:
                                                if f['programs'] <= 768:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    if f['max_seqlen_k'] <= 384:
                                                        return (64, 64, 4, 2)
                                                    else:
                                                        if f['group'] <= 6:
                                                            if f['num_tokens'] <= 6144:
                                                                return (64, 64, 4, 2)
                                                            else:
                                                                return (128, 64, 4, 2)
                                                        else:
                                                            return (128, 64, 4, 2)
                                        else:
                                            if f['group'] <= 2:
                                                if f['num_tokens'] <= 6144:
                                                    return (128, 64, 4, 2)
                                                else:
                                                    return (64, 64, 4, 3)
                                            else:
                                                if f['num_tokens'] <= 6144:
                                                    if f['programs'] <= 384:
                                                        if f['max_seqlen_q'] <= 384:
                                                            return (64, 64, 4, 2)
                                                        else:
                                                            return (128, 64, 4, 2)
                                                    else:
                                                        return (64, 64, 4, 2)
                                                else:
                                                    return (128, 64, 4, 2)
                                    else:
                                        if f['num_tokens'] <= 6144:
                                            return (128, 64, 4, 2)
                                        else:
                                            if f['group'] <= 2:
                                                return (64, 64, 4, 2)
                                            else:
                                                return (128, 64, 4, 2)
                                else:
                                    if f['programs'] <= 3072:
                                        if f['kv_bits'] <= 12:
                                            if f['num_tokens'] <= 3072:
                                                if f['block_size'] <= 40:
                                                    if f['programs'] <= 384:
                                                        return (64, 64, 4, 2)
                                                    else:
                                                        return (64, 64, 4, 3)
                                                else:
                                                    return (64, 64, 4, 2)
                                            else:
                                                if f['block_size'] <= 40:
                                                    if f['programs'] <= 768:
                                                        if f['num_seqs'] <= 6:
                                                            return (64, 64, 4, 2)
                                                        else:
                                                            return (64, 64, 4, 3)
                                                    else:
                                                        return (128, 64, 4, 2)
                                                else:
                                                    if f['num_seqs'] <= 6:
                                                        return (64, 64, 4, 3)
                                                    else:
                                                        if f['group'] <= 2:
                                                            return (64, 64, 4, 3)
                                                        else:
                                                            return (128, 64, 4, 2)
                                        else:
                                            if f['programs'] <= 1536:
                                                if f['block_size'] <= 40:
                                                    if f['num_seqs'] <= 1:
                                                        if f['programs'] <= 384:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return (64, 64, 4, 2)
                                                    else:
                                                        if f['programs'] <= 768:
                                                            return (64, 64, 4, 2)
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (128, 64, 8, 3)
                                                            else:
                                                                return (64, 64, 4, 2)
                                                else:
                                                    return (64, 64, 4, 2)
                                            else:
                                                if f['block_size'] <= 40:
                                                    return (128, 64, 8, 3)
                                                else:
                                                    return (128, 64, 4, 2)
                                    else:
                                        if f['kv_bits'] <= 12:
                                            return (128, 64, 4, 2)
                                        else:
                                            if f['block_size'] <= 40:
                                                return (128, 64, 8, 3)
                                            else:
                                                return (128, 64, 4, 2)
                            else:
                                if f['kv_bits'] <= 12:
                                    if f['group'] <= 2:
                                        return (64, 64, 4, 3)
                                    else:
                                        return (128, 64, 4, 2)
                                else:
                                    if f['group'] <= 6:
                                        return (128, 64, 8, 3)
                                    else:
                                        if f['block_size'] <= 40:
                                            return (128, 64, 8, 3)
                                        else:
                                            return (128, 64, 4, 2)
            else:
                if f['max_seqlen_q'] <= 768:
                    if f['num_kv_heads'] <= 5:
                        if f['num_tokens'] <= 515:
                            if f['max_seqlen_q'] <= 384:
                                return (64, 64, 4, 2)
                            else:
                                if f['kv_bits'] <= 12:
                                    return (64, 64, 4, 2)
                                else:
                                    if f['block_size'] <= 40:
                                        return (64, 128, 4, 2)
                                    else:
                                        if f['programs'] <= 48:
                                            return (64, 64, 4, 2)
                                        else:
                                            return (64, 128, 4, 2)
                        else:
                            if f['kv_bits'] <= 12:
                                if f['num_seqs'] <= 24:
                                    if f['programs'] <= 48:
                                        if f['num_tokens'] <= 1536:
                                            return (64, 64, 4, 2)
                                        else:
                                            if f['num_seqs'] <= 6:
                                                if f['block_size'] <= 40:
                                                    if f['num_kv_heads'] <= 1:
                                                        return (64, 64, 4, 2)
                                                    else:
                                                        return (64, 128, 4, 2)
                                                else:
                                                    return (64, 64, 4, 2)
                                            else:
                                                return (64, 64, 4, 2)
                                    else:
                                        return (64, 64, 4, 2)
                                else:
                                    if f['group'] <= 2:
                                        if f['programs'] <= 384:
                                            return (64, 64, 4, 2)
                                        else:
                                            if f['programs'] <= 768:
                                                if f['block_size'] <= 40:
                                                    return (128, 128, 8, 2)
                                                else:
                                                    return (64, 64, 4, 2)
                                            else:
                                                return (64, 64, 4, 2)
                                    else:
                                        if f['block_size'] <= 40:
                                            return (64, 128, 4, 2)
                                        else:
                                            if f['num_seqs'] <= 80:
                                                return (64, 64, 4, 2)
                                            else:
                                                if f['programs'] <= 6144:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    return (64, 64, 4, 2)
                            else:
                                if f['num_seqs'] <= 24:
                                    if f['programs'] <= 96:
                                        if f['num_kv_heads'] <= 1:
                                            if f['num_tokens'] <= 1536:
                                                if f['group'] <= 2:
                                                    if f['block_size'] <= 40:
                                                        if f['max_seqlen_q'] <= 384:
                                                            return (64, 64, 4, 2)
                                                        else:
                                                            return (64, 128, 4, 2)
                                                    else:
                                                        return (64, 64, 4, 2)
                                                else:
                                                    if f['max_seqlen_k'] <= 384:
                                                        return (64, 64, 4, 2)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            if f['group'] <= 6:
                                                                return (64, 128, 4, 2)
                                                            else:
                                                                return (64, 64, 4, 2)
                                                        else:
                                                            return (64, 64, 4, 2)
                                            else:
                                                if f['block_size'] <= 40:
                                                    if f['group'] <= 2:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        if f['max_seqlen_q'] <= 384:
                                                            return (64, 64, 4, 2)
                                                        else:
                                                            return (64, 128, 4, 2)
                                                else:
                                                    if f['group'] <= 2:
                                                        return (64, 64, 4, 2)
                                                    else:
                                                        if f['max_seqlen_k'] <= 384:
                                                            return (64, 64, 4, 2)
                                                        else:
                                                            return (64, 128, 4, 2)
                                        else:
                                            if f['block_size'] <= 40:
                                                if f['max_seqlen_k'] <= 384:
                                                    if f['programs'] <= 48:
                                                        if f['num_tokens'] <= 1536:
                                                            return (64, 64, 4, 2)
                                                        else:
                                                            return (64, 128, 4, 2)
                                                    else:
                                                        return (64, 64, 4, 2)
                                                else:
                                                    return (64, 128, 4, 2)
                                            else:
                                                if f['group'] <= 2:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    if f['max_seqlen_q'] <= 384:
                                                        return (128, 64, 8, 2)
                                                    else:
                                                        return (64, 64, 4, 2)
                                    else:
                                        if f['programs'] <= 192:
                                            if f['group'] <= 2:
                                                return (64, 64, 4, 2)
                                            else:
                                                if f['num_tokens'] <= 771:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    return (128, 64, 8, 2)
                                        else:
                                            if f['num_tokens'] <= 1283:
                                                if f['num_kv_heads'] <= 1:
                                                    if f['block_size'] <= 40:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        return (64, 64, 4, 2)
                                                else:
                                                    return (64, 64, 4, 2)
                                            else:
                                                if f['num_kv_heads'] <= 1:
                                                    if f['max_seqlen_q'] <= 384:
                                                        if f['block_size'] <= 40:
                                                            return (128, 32, 4, 3)
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        if f['num_tokens'] <= 6144:
                                                            return (128, 64, 8, 2)
                                                        else:
                                                            return (128, 32, 4, 3)
                                                else:
                                                    if f['num_seqs'] <= 6:
                                                        return (128, 64, 8, 2)
                                                    else:
                                                        if f['programs'] <= 384:
                                                            if f['max_seqlen_q'] <= 384:
                                                                return (128, 32, 4, 3)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (128, 32, 4, 3)
                                                                else:
                                                                    return (128, 64, 8, 2)
                                                        else:
                                                            return (128, 32, 4, 3)
                                else:
                                    return (64, 64, 4, 2)
                    else:
                        if f['num_tokens'] <= 531:
                            if f['num_seqs'] <= 20:
                                if f['kv_bits'] <= 12:
                                    if f['programs'] <= 1536:
                                        return (64, 64, 4, 2)
                                    else:
                                        if f['block_size'] <= 40:
                                            return (64, 64, 4, 3)
                                        else:
                                            return (64, 64, 4, 2)
                                else:
                                    if f['programs'] <= 96:
                                        if f['block_size'] <= 40:
                                            if f['programs'] <= 48:
                                                return (64, 128, 4, 2)
                                            else:
                                                return (64, 64, 4, 2)
                                        else:
                                            return (64, 64, 4, 2)
                                    else:
                                        if f['num_tokens'] <= 515:
                                            if f['block_size'] <= 40:
                                                if f['num_seqs'] <= 1:
                                                    return (128, 64, 8, 2)
                                                else:
                                                    if f['max_seqlen_q'] <= 192:
                                                        if f['group'] <= 6:
                                                            return (64, 64, 4, 2)
                                                        else:
                                                            return (128, 64, 8, 2)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (128, 64, 8, 2)
                                                        else:
                                                            return (128, 32, 4, 3)
                                            else:
                                                if f['group'] <= 6:
                                                    return (128, 64, 8, 2)
                                                else:
                                                    if f['num_seqs'] <= 1:
                                                        return (128, 64, 8, 2)
                                                    else:
                                                        if f['max_seqlen_k'] <= 192:
                                                            return (128, 64, 8, 2)
                                                        else:
                                                            return (128, 32, 4, 3)
                                        else:
                                            if f['programs'] <= 640:
                                                if f['block_size'] <= 40:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    return (64, 64, 4, 2)
                                            else:
                                                return (64, 64, 4, 2)
                            else:
                                return (64, 64, 4, 2)
                        else:
                            if f['num_seqs'] <= 24:
                                if f['group'] <= 6:
                                    if f['kv_bits'] <= 12:
                                        if f['programs'] <= 1536:
                                            return (64, 64, 4, 2)
                                        else:
                                            if f['block_size'] <= 40:
                                                return (64, 64, 4, 2)
                                            else:
                                                return 'hand'
                                    else:
                                        if f['num_seqs'] <= 3:
                                            if f['block_size'] <= 40:
                                                if f['group'] <= 2:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    return (64, 64, 4, 2)
                                            else:
                                                if f['programs'] <= 160:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    return (128, 64, 8, 2)
                                        else:
                                            if f['num_tokens'] <= 1536:
                                                if f['group'] <= 2:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return 'hand'
                                                    else:
                                                        return (128, 32, 4, 3)
                                            else:
                                                if f['programs'] <= 192:
                                                    if f['num_seqs'] <= 6:
                                                        return (128, 64, 8, 2)
                                                    else:
                                                        return (64, 64, 4, 2)
                                                else:
                                                    return (128, 32, 4, 3)
                                else:
                                    if f['kv_bits'] <= 12:
                                        if f['num_tokens'] <= 6144:
                                            return (64, 64, 4, 2)
                                        else:
                                            return 'hand'
                                    else:
                                        if f['num_seqs'] <= 3:
                                            return (128, 32, 4, 3)
                                        else:
                                            if f['programs'] <= 1536:
                                                if f['block_size'] <= 40:
                                                    if f['programs'] <= 768:
                                                        return (128, 32, 4, 3)
                                                    else:
                                                        return 'hand'
                                                else:
                                                    if f['num_tokens'] <= 1536:
                                                        return 'hand'
                                                    else:
                                                        return (128, 32, 4, 3)
                                            else:
                                                if f['num_tokens'] <= 6144:
                                                    return (128, 32, 4, 3)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (128, 32, 4, 3)
                                                    else:
                                                        return 'hand'
                            else:
                                if f['num_seqs'] <= 80:
                                    if f['block_size'] <= 40:
                                        if f['kv_bits'] <= 12:
                                            return (64, 128, 4, 2)
                                        else:
                                            return (64, 64, 4, 2)
                                    else:
                                        if f['kv_bits'] <= 12:
                                            if f['programs'] <= 2560:
                                                return (64, 64, 4, 2)
                                            else:
                                                return (64, 64, 4, 3)
                                        else:
                                            return (64, 64, 4, 2)
                                else:
                                    if f['programs'] <= 10240:
                                        if f['kv_bits'] <= 12:
                                            if f['block_size'] <= 40:
                                                return (64, 128, 4, 2)
                                            else:
                                                return (64, 64, 4, 3)
                                        else:
                                            return (64, 64, 4, 3)
                                    else:
                                        return (64, 64, 4, 3)
                else:
                    if f['programs'] <= 96:
                        if f['num_seqs'] <= 1:
                            if f['kv_bits'] <= 12:
                                return (64, 128, 4, 2)
                            else:
                                if f['programs'] <= 48:
                                    if f['block_size'] <= 40:
                                        return (64, 128, 4, 2)
                                    else:
                                        return (64, 64, 4, 2)
                                else:
                                    return (64, 128, 4, 2)
                        else:
                            if f['programs'] <= 24:
                                if f['kv_bits'] <= 12:
                                    return (64, 128, 4, 2)
                                else:
                                    if f['block_size'] <= 40:
                                        return (64, 128, 4, 2)
                                    else:
                                        return (64, 64, 4, 2)
                            else:
                                if f['block_size'] <= 40:
                                    return (64, 128, 4, 2)
                                else:
                                    if f['programs'] <= 48:
                                        if f['kv_bits'] <= 12:
                                            return (64, 128, 4, 2)
                                        else:
                                            return (64, 64, 4, 2)
                                    else:
                                        return (64, 128, 4, 2)
                    else:
                        if f['programs'] <= 768:
                            if f['block_size'] <= 40:
                                if f['programs'] <= 384:
                                    if f['num_tokens'] <= 1536:
                                        if f['kv_bits'] <= 12:
                                            return (128, 128, 8, 2)
                                        else:
                                            return (128, 64, 8, 2)
                                    else:
                                        if f['programs'] <= 192:
                                            if f['num_kv_heads'] <= 1:
                                                return (128, 128, 8, 2)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    return (128, 128, 8, 2)
                                                else:
                                                    if f['group'] <= 2:
                                                        return (128, 128, 8, 2)
                                                    else:
                                                        return (128, 64, 8, 2)
                                        else:
                                            if f['kv_bits'] <= 12:
                                                if f['group'] <= 2:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    return (128, 128, 8, 2)
                                            else:
                                                if f['group'] <= 2:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    return (128, 64, 8, 2)
                                else:
                                    if f['group'] <= 2:
                                        if f['kv_bits'] <= 12:
                                            return (64, 128, 4, 2)
                                        else:
                                            return (64, 64, 4, 2)
                                    else:
                                        if f['kv_bits'] <= 12:
                                            return (64, 64, 4, 2)
                                        else:
                                            if f['num_seqs'] <= 12:
                                                if f['num_seqs'] <= 6:
                                                    return (128, 64, 8, 3)
                                                else:
                                                    if f['num_kv_heads'] <= 1:
                                                        return (128, 64, 8, 3)
                                                    else:
                                                        return (128, 32, 4, 3)
                                            else:
                                                return (64, 64, 4, 2)
                            else:
                                if f['group'] <= 6:
                                    if f['programs'] <= 192:
                                        if f['kv_bits'] <= 12:
                                            return (128, 128, 8, 2)
                                        else:
                                            if f['num_tokens'] <= 6144:
                                                return (128, 64, 8, 2)
                                            else:
                                                return (64, 64, 4, 2)
                                    else:
                                        if f['num_seqs'] <= 1:
                                            if f['kv_bits'] <= 12:
                                                return (64, 64, 4, 2)
                                            else:
                                                return (128, 64, 8, 2)
                                        else:
                                            if f['num_kv_heads'] <= 1:
                                                if f['num_seqs'] <= 12:
                                                    if f['kv_bits'] <= 12:
                                                        return (64, 64, 4, 2)
                                                    else:
                                                        return (128, 64, 8, 2)
                                                else:
                                                    return (64, 64, 4, 2)
                                            else:
                                                if f['num_kv_heads'] <= 5:
                                                    if f['num_seqs'] <= 6:
                                                        if f['kv_bits'] <= 12:
                                                            return (128, 128, 8, 2)
                                                        else:
                                                            return (128, 64, 8, 2)
                                                    else:
                                                        return (64, 64, 4, 2)
                                                else:
                                                    return (64, 64, 4, 2)
                                else:
                                    if f['kv_bits'] <= 12:
                                        if f['num_kv_heads'] <= 5:
                                            if f['programs'] <= 384:
                                                return (128, 128, 8, 2)
                                            else:
                                                if f['num_tokens'] <= 6144:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    return (128, 128, 8, 2)
                                        else:
                                            return (64, 64, 4, 2)
                                    else:
                                        if f['programs'] <= 384:
                                            return (128, 64, 8, 2)
                                        else:
                                            if f['num_kv_heads'] <= 1:
                                                return (64, 64, 4, 2)
                                            else:
                                                return (128, 64, 8, 3)
                        else:
                            if f['num_tokens'] <= 3072:
                                if f['kv_bits'] <= 12:
                                    return (64, 64, 4, 2)
                                else:
                                    if f['block_size'] <= 40:
                                        return (128, 64, 8, 3)
                                    else:
                                        return (128, 32, 4, 3)
                            else:
                                if f['num_tokens'] <= 12288:
                                    if f['kv_bits'] <= 12:
                                        if f['programs'] <= 3072:
                                            if f['num_seqs'] <= 6:
                                                return (64, 64, 4, 2)
                                            else:
                                                if f['num_kv_heads'] <= 5:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (64, 64, 4, 3)
                                                    else:
                                                        return (64, 64, 4, 2)
                                        else:
                                            if f['block_size'] <= 40:
                                                return (128, 64, 4, 2)
                                            else:
                                                return 'hand'
                                    else:
                                        return (128, 32, 4, 3)
                                else:
                                    if f['programs'] <= 1536:
                                        if f['kv_bits'] <= 12:
                                            if f['group'] <= 2:
                                                if f['block_size'] <= 40:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    return (64, 64, 4, 2)
                                            else:
                                                return (64, 64, 4, 2)
                                        else:
                                            return (128, 32, 4, 3)
                                    else:
                                        if f['block_size'] <= 40:
                                            if f['kv_bits'] <= 12:
                                                if f['programs'] <= 3072:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    return (128, 64, 4, 2)
                                            else:
                                                return (128, 32, 4, 3)
                                        else:
                                            if f['group'] <= 6:
                                                if f['kv_bits'] <= 12:
                                                    return 'hand'
                                                else:
                                                    return (128, 32, 4, 3)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    if f['num_kv_heads'] <= 5:
                                                        return (64, 64, 4, 2)
                                                    else:
                                                        return 'hand'
                                                else:
                                                    return 'hand'
        else:
            if f['num_tokens'] <= 3135:
                if f['programs'] <= 3072:
                    if f['head_dim'] <= 96:
                        if f['max_seqlen_k'] <= 81920:
                            if f['num_kv_heads'] <= 5:
                                if f['num_seqs'] <= 20:
                                    if f['max_seqlen_q'] <= 192:
                                        if f['max_seqlen_k'] <= 5120:
                                            return (64, 128, 4, 2)
                                        else:
                                            if f['num_kv_heads'] <= 1:
                                                if f['programs'] <= 20:
                                                    if f['block_size'] <= 40:
                                                        if f['kv_bits'] <= 12:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return (64, 64, 4, 3)
                                                    else:
                                                        return (64, 128, 4, 2)
                                                else:
                                                    return (64, 128, 4, 2)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    return (64, 64, 4, 3)
                                    else:
                                        if f['programs'] <= 192:
                                            if f['num_seqs'] <= 4:
                                                if f['programs'] <= 96:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    if f['max_seqlen_k'] <= 20480:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        if f['kv_bits'] <= 12:
                                                            if f['num_kv_heads'] <= 1:
                                                                return (64, 128, 4, 2)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (64, 128, 4, 2)
                                                                else:
                                                                    return 'hand'
                                                        else:
                                                            return (64, 128, 4, 2)
                                            else:
                                                if f['num_kv_heads'] <= 1:
                                                    if f['group'] <= 2:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        if f['block_size'] <= 40:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            if f['kv_bits'] <= 12:
                                                                return (64, 128, 4, 2)
                                                            else:
                                                                if f['max_seqlen_k'] <= 5120:
                                                                    return (64, 128, 4, 2)
                                                                else:
                                                                    return (64, 64, 4, 3)
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        if f['max_seqlen_k'] <= 5120:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return (64, 64, 4, 3)
                                        else:
                                            if f['num_tokens'] <= 1283:
                                                if f['max_seqlen_k'] <= 5120:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        if f['num_kv_heads'] <= 1:
                                                            if f['block_size'] <= 40:
                                                                return (64, 128, 4, 2)
                                                            else:
                                                                return (64, 64, 4, 3)
                                                        else:
                                                            return (64, 64, 4, 3)
                                            else:
                                                if f['group'] <= 2:
                                                    if f['kv_bits'] <= 12:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        if f['max_seqlen_k'] <= 5120:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return (64, 64, 4, 3)
                                                else:
                                                    return (64, 128, 4, 2)
                                else:
                                    if f['kv_bits'] <= 12:
                                        if f['num_kv_heads'] <= 1:
                                            if f['num_tokens'] <= 399:
                                                if f['programs'] <= 384:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    if f['programs'] <= 768:
                                                        if f['max_seqlen_k'] <= 5120:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return 'hand'
                                                            else:
                                                                return (64, 128, 4, 2)
                                                    else:
                                                        return (64, 128, 4, 2)
                                            else:
                                                return (64, 128, 4, 2)
                                        else:
                                            if f['block_size'] <= 40:
                                                if f['num_tokens'] <= 399:
                                                    if f['programs'] <= 768:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        if f['max_seqlen_k'] <= 5120:
                                                            return (64, 64, 4, 3)
                                                        else:
                                                            if f['programs'] <= 1536:
                                                                return (64, 64, 4, 3)
                                                            else:
                                                                return (64, 128, 4, 2)
                                                else:
                                                    if f['programs'] <= 640:
                                                        if f['max_seqlen_k'] <= 5120:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return (64, 64, 4, 3)
                                                    else:
                                                        if f['num_seqs'] <= 80:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            if f['max_seqlen_k'] <= 5120:
                                                                return (64, 64, 4, 3)
                                                            else:
                                                                return (64, 128, 4, 2)
                                            else:
                                                if f['num_tokens'] <= 207:
                                                    if f['programs'] <= 384:
                                                        if f['programs'] <= 160:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            if f['max_seqlen_k'] <= 5120:
                                                                return (64, 128, 4, 2)
                                                            else:
                                                                return (64, 64, 4, 3)
                                                    else:
                                                        if f['max_seqlen_k'] <= 5120:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return 'hand'
                                                else:
                                                    if f['num_seqs'] <= 80:
                                                        if f['max_seqlen_k'] <= 5120:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            if f['num_tokens'] <= 1311:
                                                                return (64, 64, 4, 3)
                                                            else:
                                                                return (64, 128, 4, 2)
                                                    else:
                                                        if f['programs'] <= 640:
                                                            if f['max_seqlen_k'] <= 5120:
                                                                return (64, 64, 4, 3)
                                                            else:
                                                                return (64, 128, 4, 2)
                                                        else:
                                                            return (64, 64, 4, 3)
                                    else:
                                        if f['max_seqlen_k'] <= 5120:
                                            if f['max_seqlen_q'] <= 1280:
                                                if f['block_size'] <= 40:
                                                    if f['num_seqs'] <= 80:
                                                        if f['programs'] <= 96:
                                                            if f['num_kv_heads'] <= 1:
                                                                return (64, 128, 4, 2)
                                                            else:
                                                                return (64, 64, 4, 3)
                                                        else:
                                                            if f['num_tokens'] <= 351:
                                                                if f['num_kv_heads'] <= 1:
                                                                    return (64, 128, 4, 2)
                                                                else:
                                                                    return (64, 64, 4, 3)
                                                            else:
                                                                return (64, 128, 4, 2)
                                                    else:
                                                        if f['programs'] <= 1536:
                                                            return (64, 64, 4, 3)
                                                        else:
                                                            if f['num_kv_heads'] <= 1:
                                                                return (64, 128, 4, 2)
                                                            else:
                                                                return (64, 64, 4, 3)
                                                else:
                                                    if f['programs'] <= 768:
                                                        if f['group'] <= 2:
                                                            return (64, 64, 4, 3)
                                                        else:
                                                            if f['max_seqlen_q'] <= 320:
                                                                if f['group'] <= 6:
                                                                    return (64, 64, 4, 3)
                                                                else:
                                                                    if f['programs'] <= 384:
                                                                        return (64, 128, 4, 2)
                                                                    else:
                                                                        return (64, 64, 4, 3)
                                                            else:
                                                                return (64, 128, 4, 2)
                                                    else:
                                                        if f['programs'] <= 1536:
                                                            return (64, 64, 4, 3)
                                                        else:
                                                            if f['max_seqlen_q'] <= 320:
                                                                return (64, 64, 4, 3)
                                                            else:
                                                                return (64, 128, 4, 2)
                                            else:
                                                return (64, 128, 4, 2)
                                        else:
                                            if f['programs'] <= 1536:
                                                return (64, 64, 4, 3)
                                            else:
                                                if f['num_seqs'] <= 80:
                                                    if f['block_size'] <= 40:
                                                        if f['num_kv_heads'] <= 1:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        return (64, 64, 4, 3)
                                                else:
                                                    return (64, 64, 4, 3)
                            else:
                                if f['programs'] <= 384:
                                    if f['max_seqlen_k'] <= 20480:
                                        if f['num_seqs'] <= 4:
                                            if f['programs'] <= 192:
                                                return (64, 128, 4, 2)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    return (128, 64, 4, 2)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        if f['max_seqlen_k'] <= 5120:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return (128, 64, 8, 3)
                                        else:
                                            if f['max_seqlen_k'] <= 5120:
                                                if f['kv_bits'] <= 12:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    if f['num_tokens'] <= 339:
                                                        if f['group'] <= 2:
                                                            return (64, 64, 4, 3)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                return (64, 128, 4, 2)
                                                            else:
                                                                return (64, 64, 4, 3)
                                                    else:
                                                        return (64, 128, 4, 2)
                                            else:
                                                if f['programs'] <= 160:
                                                    if f['block_size'] <= 40:
                                                        return (64, 64, 4, 3)
                                                    else:
                                                        if f['kv_bits'] <= 12:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return (64, 64, 4, 3)
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        return (64, 64, 4, 3)
                                    else:
                                        if f['programs'] <= 48:
                                            return (64, 64, 4, 3)
                                        else:
                                            if f['programs'] <= 96:
                                                return (64, 128, 4, 2)
                                            else:
                                                if f['max_seqlen_q'] <= 384:
                                                    if f['kv_bits'] <= 12:
                                                        if f['block_size'] <= 40:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        return 'hand'
                                                else:
                                                    if f['programs'] <= 192:
                                                        if f['group'] <= 2:
                                                            if f['kv_bits'] <= 12:
                                                                if f['block_size'] <= 40:
                                                                    return (64, 128, 4, 2)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                return (64, 128, 4, 2)
                                                        else:
                                                            if f['kv_bits'] <= 12:
                                                                if f['block_size'] <= 40:
                                                                    return (64, 128, 4, 2)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                return 'hand'
                                                    else:
                                                        if f['kv_bits'] <= 12:
                                                            if f['block_size'] <= 40:
                                                                return (128, 64, 4, 2)
                                                            else:
                                                                return (64, 128, 4, 2)
                                                        else:
                                                            return (128, 64, 8, 3)
                                else:
                                    if f['num_seqs'] <= 4:
                                        if f['kv_bits'] <= 12:
                                            if f['max_seqlen_k'] <= 5120:
                                                if f['block_size'] <= 40:
                                                    if f['programs'] <= 768:
                                                        return (64, 64, 4, 3)
                                                    else:
                                                        return (64, 64, 4, 2)
                                                else:
                                                    return (64, 64, 4, 2)
                                            else:
                                                return (128, 64, 4, 2)
                                        else:
                                            if f['programs'] <= 768:
                                                if f['max_seqlen_k'] <= 5120:
                                                    if f['block_size'] <= 40:
                                                        return (128, 64, 4, 2)
                                                    else:
                                                        return (64, 64, 4, 2)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        if f['max_seqlen_k'] <= 20480:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return (128, 64, 8, 3)
                                                    else:
                                                        return (128, 64, 8, 3)
                                            else:
                                                return (128, 64, 8, 3)
                                    else:
                                        if f['programs'] <= 768:
                                            if f['kv_bits'] <= 12:
                                                return (64, 128, 4, 2)
                                            else:
                                                if f['block_size'] <= 40:
                                                    if f['max_seqlen_k'] <= 5120:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        return (64, 64, 4, 3)
                                                else:
                                                    return (64, 64, 4, 3)
                                        else:
                                            if f['num_seqs'] <= 20:
                                                if f['max_seqlen_k'] <= 5120:
                                                    if f['kv_bits'] <= 12:
                                                        if f['group'] <= 6:
                                                            if f['num_tokens'] <= 1287:
                                                                return (64, 64, 4, 2)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (64, 128, 4, 2)
                                                                else:
                                                                    return (64, 64, 4, 3)
                                                        else:
                                                            return (64, 64, 4, 3)
                                                    else:
                                                        if f['group'] <= 6:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return (64, 64, 4, 3)
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        if f['block_size'] <= 40:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            if f['max_seqlen_q'] <= 1280:
                                                                return (64, 64, 4, 3)
                                                            else:
                                                                return (64, 128, 4, 2)
                                                    else:
                                                        return (64, 64, 4, 3)
                                            else:
                                                return (64, 64, 4, 3)
                        else:
                            if f['programs'] <= 48:
                                if f['kv_bits'] <= 12:
                                    if f['num_kv_heads'] <= 1:
                                        return (64, 128, 4, 2)
                                    else:
                                        if f['group'] <= 2:
                                            return (64, 64, 4, 3)
                                        else:
                                            if f['block_size'] <= 40:
                                                if f['group'] <= 6:
                                                    return (64, 64, 4, 3)
                                                else:
                                                    return (64, 128, 4, 2)
                                            else:
                                                return (64, 128, 4, 2)
                                else:
                                    return (64, 64, 4, 3)
                            else:
                                if f['programs'] <= 192:
                                    if f['num_kv_heads'] <= 5:
                                        if f['max_seqlen_q'] <= 1280:
                                            if f['kv_bits'] <= 12:
                                                return (64, 128, 4, 2)
                                            else:
                                                return 'hand'
                                        else:
                                            if f['num_kv_heads'] <= 1:
                                                return (64, 128, 4, 2)
                                            else:
                                                if f['block_size'] <= 40:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    return 'hand'
                                    else:
                                        if f['block_size'] <= 40:
                                            if f['group'] <= 6:
                                                if f['kv_bits'] <= 12:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    if f['max_seqlen_q'] <= 1280:
                                                        return 'hand'
                                                    else:
                                                        return (64, 128, 4, 2)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    return 'hand'
                                                else:
                                                    return (128, 128, 8, 3)
                                        else:
                                            if f['programs'] <= 96:
                                                if f['kv_bits'] <= 12:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    return 'hand'
                                            else:
                                                return 'hand'
                                else:
                                    if f['kv_bits'] <= 12:
                                        return (128, 64, 4, 2)
                                    else:
                                        if f['num_kv_heads'] <= 5:
                                            if f['block_size'] <= 40:
                                                return (128, 64, 8, 2)
                                            else:
                                                return (128, 64, 8, 3)
                                        else:
                                            return (128, 64, 8, 3)
                    else:
                        if f['programs'] <= 24:
                            if f['kv_bits'] <= 12:
                                if f['group'] <= 6:
                                    if f['num_tokens'] <= 1280:
                                        if f['programs'] <= 12:
                                            if f['max_seqlen_k'] <= 5120:
                                                if f['num_tokens'] <= 195:
                                                    return (64, 64, 4, 3)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        return (64, 64, 4, 3)
                                            else:
                                                if f['max_seqlen_k'] <= 81920:
                                                    if f['programs'] <= 3:
                                                        if f['block_size'] <= 40:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            if f['max_seqlen_k'] <= 20480:
                                                                return (64, 64, 4, 3)
                                                            else:
                                                                return (64, 128, 4, 2)
                                                    else:
                                                        if f['num_tokens'] <= 384:
                                                            if f['group'] <= 2:
                                                                return (64, 64, 4, 3)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    if f['max_seqlen_k'] <= 20480:
                                                                        return (64, 128, 4, 2)
                                                                    else:
                                                                        return (64, 64, 4, 3)
                                                                else:
                                                                    return (64, 64, 4, 3)
                                                        else:
                                                            if f['max_seqlen_k'] <= 20480:
                                                                if f['num_kv_heads'] <= 1:
                                                                    return (64, 64, 4, 3)
                                                                else:
                                                                    if f['block_size'] <= 40:
                                                                        return (64, 128, 4, 2)
                                                                    else:
                                                                        return (64, 64, 4, 3)
                                                            else:
                                                                if f['block_size'] <= 40:
                                                                    return (64, 128, 4, 2)
                                                                else:
                                                                    return (64, 64, 4, 3)
                                                else:
                                                    return (64, 64, 4, 3)
                                        else:
                                            if f['max_seqlen_k'] <= 20480:
                                                if f['num_tokens'] <= 384:
                                                    if f['group'] <= 2:
                                                        if f['num_seqs'] <= 4:
                                                            return (64, 64, 4, 3)
                                                        else:
                                                            if f['block_size'] <= 40:
                                                                if f['max_seqlen_k'] <= 5120:
                                                                    return (64, 128, 4, 2)
                                                                else:
                                                                    return (64, 64, 4, 3)
                                                            else:
                                                                return (64, 64, 4, 3)
                                                    else:
                                                        return (64, 128, 4, 2)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        if f['max_seqlen_k'] <= 5120:
                                                            return (64, 64, 4, 3)
                                                        else:
                                                            return (64, 128, 4, 2)
                                                    else:
                                                        if f['max_seqlen_k'] <= 5120:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return (64, 64, 4, 3)
                                            else:
                                                if f['block_size'] <= 40:
                                                    if f['max_seqlen_k'] <= 81920:
                                                        if f['num_kv_heads'] <= 5:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return (64, 64, 4, 3)
                                                    else:
                                                        return (64, 64, 4, 3)
                                                else:
                                                    if f['max_seqlen_k'] <= 81920:
                                                        if f['num_kv_heads'] <= 5:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return (64, 64, 4, 3)
                                                    else:
                                                        return (64, 64, 4, 3)
                                    else:
                                        if f['block_size'] <= 40:
                                            if f['max_seqlen_k'] <= 81920:
                                                return (64, 128, 4, 2)
                                            else:
                                                return (64, 64, 4, 3)
                                        else:
                                            if f['max_seqlen_k'] <= 5120:
                                                return (64, 64, 4, 3)
                                            else:
                                                if f['max_seqlen_k'] <= 81920:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    return (64, 64, 4, 3)
                                else:
                                    if f['max_seqlen_k'] <= 81920:
                                        return (64, 128, 4, 2)
                                    else:
                                        return (64, 64, 4, 3)
                            else:
                                if f['block_size'] <= 40:
                                    if f['max_seqlen_k'] <= 81920:
                                        if f['num_tokens'] <= 195:
                                            if f['programs'] <= 12:
                                                return (64, 128, 4, 2)
                                            else:
                                                if f['max_seqlen_k'] <= 5120:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    return (64, 64, 4, 3)
                                        else:
                                            return (64, 128, 4, 2)
                                    else:
                                        if f['num_tokens'] <= 384:
                                            if f['programs'] <= 3:
                                                return (64, 128, 4, 2)
                                            else:
                                                if f['num_kv_heads'] <= 5:
                                                    return (64, 64, 4, 3)
                                                else:
                                                    return (64, 128, 4, 2)
                                        else:
                                            if f['group'] <= 2:
                                                return (64, 128, 4, 2)
                                            else:
                                                return (64, 64, 4, 3)
                                else:
                                    if f['max_seqlen_k'] <= 20480:
                                        if f['num_seqs'] <= 4:
                                            if f['programs'] <= 3:
                                                if f['max_seqlen_k'] <= 5120:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    return (64, 128, 4, 2)
                                            else:
                                                if f['num_kv_heads'] <= 5:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    if f['max_seqlen_k'] <= 5120:
                                                        return (64, 64, 4, 2)
                                                    else:
                                                        return (64, 64, 4, 3)
                                        else:
                                            return (64, 64, 4, 3)
                                    else:
                                        if f['group'] <= 6:
                                            if f['num_tokens'] <= 1280:
                                                if f['programs'] <= 3:
                                                    if f['max_seqlen_k'] <= 81920:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        return (64, 64, 4, 3)
                                                else:
                                                    return (64, 64, 4, 3)
                                            else:
                                                if f['max_seqlen_k'] <= 81920:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    return (64, 64, 4, 3)
                                        else:
                                            if f['max_seqlen_k'] <= 81920:
                                                return (64, 64, 4, 2)
                                            else:
                                                return (64, 64, 4, 3)
                        else:
                            if f['block_size'] <= 40:
                                if f['programs'] <= 48:
                                    if f['max_seqlen_k'] <= 81920:
                                        return (64, 128, 4, 2)
                                    else:
                                        if f['num_kv_heads'] <= 5:
                                            if f['max_seqlen_q'] <= 384:
                                                if f['kv_bits'] <= 12:
                                                    return (64, 64, 4, 3)
                                                else:
                                                    return (64, 128, 4, 2)
                                            else:
                                                if f['group'] <= 2:
                                                    if f['kv_bits'] <= 12:
                                                        return (64, 64, 4, 3)
                                                    else:
                                                        return (64, 128, 4, 2)
                                                else:
                                                    return (64, 64, 4, 3)
                                        else:
                                            return (64, 128, 4, 2)
                                else:
                                    if f['num_seqs'] <= 4:
                                        if f['max_seqlen_k'] <= 5120:
                                            if f['programs'] <= 96:
                                                if f['max_seqlen_q'] <= 384:
                                                    if f['kv_bits'] <= 12:
                                                        return (128, 128, 8, 2)
                                                    else:
                                                        return (64, 128, 4, 2)
                                                else:
                                                    return (64, 128, 4, 2)
                                            else:
                                                if f['num_kv_heads'] <= 5:
                                                    if f['programs'] <= 192:
                                                        return (128, 128, 8, 2)
                                                    else:
                                                        if f['kv_bits'] <= 12:
                                                            return (128, 128, 8, 2)
                                                        else:
                                                            return (128, 64, 8, 2)
                                                else:
                                                    if f['programs'] <= 384:
                                                        return (128, 128, 8, 2)
                                                    else:
                                                        if f['group'] <= 6:
                                                            if f['kv_bits'] <= 12:
                                                                return (128, 128, 8, 2)
                                                            else:
                                                                return (128, 64, 8, 3)
                                                        else:
                                                            return (128, 128, 8, 2)
                                        else:
                                            if f['max_seqlen_q'] <= 1280:
                                                if f['group'] <= 6:
                                                    if f['max_seqlen_k'] <= 20480:
                                                        if f['kv_bits'] <= 12:
                                                            return (128, 128, 8, 2)
                                                        else:
                                                            if f['programs'] <= 96:
                                                                return (64, 128, 4, 2)
                                                            else:
                                                                return 'hand'
                                                    else:
                                                        if f['kv_bits'] <= 12:
                                                            if f['num_tokens'] <= 384:
                                                                if f['max_seqlen_k'] <= 81920:
                                                                    return (64, 128, 4, 2)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                if f['max_seqlen_k'] <= 81920:
                                                                    return 'hand'
                                                                else:
                                                                    return (64, 128, 4, 2)
                                                        else:
                                                            if f['num_tokens'] <= 384:
                                                                if f['max_seqlen_k'] <= 81920:
                                                                    return 'hand'
                                                                else:
                                                                    return (64, 128, 4, 2)
                                                            else:
                                                                return 'hand'
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        if f['num_tokens'] <= 384:
                                                            if f['max_seqlen_k'] <= 20480:
                                                                return (128, 128, 8, 2)
                                                            else:
                                                                return (64, 128, 4, 2)
                                                        else:
                                                            return (64, 128, 4, 2)
                                                    else:
                                                        if f['programs'] <= 96:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return 'hand'
                                            else:
                                                if f['max_seqlen_k'] <= 81920:
                                                    if f['group'] <= 6:
                                                        if f['max_seqlen_k'] <= 20480:
                                                            if f['programs'] <= 96:
                                                                if f['kv_bits'] <= 12:
                                                                    return 'hand'
                                                                else:
                                                                    return (64, 128, 4, 2)
                                                            else:
                                                                if f['kv_bits'] <= 12:
                                                                    if f['num_kv_heads'] <= 5:
                                                                        return 'hand'
                                                                    else:
                                                                        return (128, 128, 8, 2)
                                                                else:
                                                                    if f['num_kv_heads'] <= 5:
                                                                        return (128, 128, 8, 2)
                                                                    else:
                                                                        return 'hand'
                                                        else:
                                                            if f['num_kv_heads'] <= 5:
                                                                if f['programs'] <= 96:
                                                                    return (64, 128, 4, 2)
                                                                else:
                                                                    if f['kv_bits'] <= 12:
                                                                        return (128, 128, 8, 2)
                                                                    else:
                                                                        return (128, 64, 8, 3)
                                                            else:
                                                                if f['kv_bits'] <= 12:
                                                                    if f['programs'] <= 320:
                                                                        return (128, 128, 8, 2)
                                                                    else:
                                                                        return 'hand'
                                                                else:
                                                                    return 'hand'
                                                    else:
                                                        if f['num_kv_heads'] <= 1:
                                                            if f['kv_bits'] <= 12:
                                                                return (128, 128, 8, 2)
                                                            else:
                                                                if f['max_seqlen_k'] <= 20480:
                                                                    return (128, 128, 8, 2)
                                                                else:
                                                                    return 'hand'
                                                        else:
                                                            if f['max_seqlen_k'] <= 20480:
                                                                if f['kv_bits'] <= 12:
                                                                    return (128, 128, 8, 2)
                                                                else:
                                                                    if f['programs'] <= 640:
                                                                        return (128, 128, 8, 2)
                                                                    else:
                                                                        return 'hand'
                                                            else:
                                                                return 'hand'
                                                else:
                                                    if f['programs'] <= 96:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        if f['kv_bits'] <= 12:
                                                            if f['programs'] <= 192:
                                                                return (128, 128, 8, 2)
                                                            else:
                                                                if f['num_kv_heads'] <= 5:
                                                                    return 'hand'
                                                                else:
                                                                    return (64, 128, 4, 2)
                                                        else:
                                                            return 'hand'
                                    else:
                                        if f['kv_bits'] <= 12:
                                            if f['group'] <= 6:
                                                if f['programs'] <= 96:
                                                    if f['num_seqs'] <= 20:
                                                        if f['num_kv_heads'] <= 5:
                                                            if f['num_tokens'] <= 327:
                                                                if f['max_seqlen_k'] <= 5120:
                                                                    return (64, 128, 4, 2)
                                                                else:
                                                                    return (64, 64, 4, 3)
                                                            else:
                                                                if f['max_seqlen_k'] <= 5120:
                                                                    return (64, 64, 4, 3)
                                                                else:
                                                                    return (64, 128, 4, 2)
                                                        else:
                                                            return (64, 64, 4, 3)
                                                    else:
                                                        return (64, 128, 4, 2)
                                                else:
                                                    return (64, 128, 4, 2)
                                            else:
                                                if f['num_tokens'] <= 207:
                                                    if f['programs'] <= 384:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        if f['num_kv_heads'] <= 5:
                                                            if f['max_seqlen_k'] <= 5120:
                                                                return (128, 128, 8, 2)
                                                            else:
                                                                return (64, 128, 4, 2)
                                                        else:
                                                            return (64, 128, 4, 2)
                                                else:
                                                    return (64, 128, 4, 2)
                                        else:
                                            if f['num_kv_heads'] <= 5:
                                                if f['num_seqs'] <= 80:
                                                    if f['num_kv_heads'] <= 1:
                                                        if f['programs'] <= 768:
                                                            if f['max_seqlen_k'] <= 5120:
                                                                return (64, 128, 4, 2)
                                                            else:
                                                                if f['programs'] <= 384:
                                                                    if f['num_seqs'] <= 20:
                                                                        if f['programs'] <= 192:
                                                                            return (64, 128, 4, 2)
                                                                        else:
                                                                            return 'hand'
                                                                    else:
                                                                        return (64, 64, 4, 3)
                                                                else:
                                                                    if f['num_seqs'] <= 20:
                                                                        return 'hand'
                                                                    else:
                                                                        return (64, 128, 4, 2)
                                                        else:
                                                            if f['max_seqlen_q'] <= 1280:
                                                                return (64, 128, 4, 2)
                                                            else:
                                                                if f['max_seqlen_k'] <= 5120:
                                                                    if f['programs'] <= 1536:
                                                                        return (128, 128, 8, 2)
                                                                    else:
                                                                        return (128, 64, 8, 3)
                                                                else:
                                                                    return 'hand'
                                                    else:
                                                        if f['group'] <= 2:
                                                            if f['max_seqlen_q'] <= 320:
                                                                if f['max_seqlen_k'] <= 5120:
                                                                    return (64, 64, 4, 3)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                if f['programs'] <= 640:
                                                                    if f['max_seqlen_k'] <= 5120:
                                                                        return (64, 128, 4, 2)
                                                                    else:
                                                                        if f['programs'] <= 160:
                                                                            return (64, 128, 4, 2)
                                                                        else:
                                                                            return 'hand'
                                                                else:
                                                                    return (64, 128, 4, 2)
                                                        else:
                                                            if f['max_seqlen_q'] <= 1280:
                                                                if f['max_seqlen_k'] <= 5120:
                                                                    if f['group'] <= 6:
                                                                        return (64, 128, 4, 2)
                                                                    else:
                                                                        if f['num_seqs'] <= 20:
                                                                            if f['max_seqlen_q'] <= 320:
                                                                                return (64, 128, 4, 2)
                                                                            else:
                                                                                return (128, 128, 8, 2)
                                                                        else:
                                                                            return (64, 64, 4, 3)
                                                                else:
                                                                    if f['group'] <= 6:
                                                                        if f['max_seqlen_q'] <= 320:
                                                                            return (64, 64, 4, 3)
                                                                        else:
                                                                            if f['programs'] <= 640:
                                                                                return 'hand'
                                                                            else:
                                                                                return (64, 128, 4, 2)
                                                                    else:
                                                                        return 'hand'
                                                            else:
                                                                if f['max_seqlen_k'] <= 5120:
                                                                    return (128, 128, 8, 2)
                                                                else:
                                                                    return 'hand'
                                                else:
                                                    if f['programs'] <= 768:
                                                        if f['max_seqlen_k'] <= 5120:
                                                            if f['num_kv_heads'] <= 1:
                                                                return (128, 64, 8, 3)
                                                            else:
                                                                return (64, 64, 4, 3)
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        if f['programs'] <= 1536:
                                                            if f['max_seqlen_k'] <= 5120:
                                                                if f['num_kv_heads'] <= 1:
                                                                    return (64, 64, 4, 3)
                                                                else:
                                                                    if f['max_seqlen_q'] <= 320:
                                                                        return (128, 32, 4, 3)
                                                                    else:
                                                                        return (64, 64, 4, 3)
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            return (64, 64, 4, 3)
                                            else:
                                                if f['num_seqs'] <= 20:
                                                    if f['max_seqlen_k'] <= 5120:
                                                        if f['programs'] <= 384:
                                                            if f['programs'] <= 160:
                                                                return (64, 64, 4, 3)
                                                            else:
                                                                return (64, 128, 4, 2)
                                                        else:
                                                            return (128, 64, 8, 3)
                                                    else:
                                                        return 'hand'
                                                else:
                                                    return (64, 64, 4, 3)
                            else:
                                if f['max_seqlen_k'] <= 5120:
                                    if f['kv_bits'] <= 12:
                                        if f['num_seqs'] <= 20:
                                            if f['programs'] <= 384:
                                                if f['group'] <= 2:
                                                    if f['programs'] <= 96:
                                                        if f['programs'] <= 48:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return (64, 64, 4, 3)
                                                    else:
                                                        if f['num_seqs'] <= 4:
                                                            return (128, 128, 8, 2)
                                                        else:
                                                            if f['max_seqlen_q'] <= 1280:
                                                                return (128, 128, 8, 3)
                                                            else:
                                                                return (64, 128, 4, 2)
                                                else:
                                                    if f['num_tokens'] <= 1283:
                                                        if f['num_kv_heads'] <= 5:
                                                            if f['num_tokens'] <= 195:
                                                                if f['num_kv_heads'] <= 1:
                                                                    return (64, 128, 4, 2)
                                                                else:
                                                                    if f['programs'] <= 96:
                                                                        return (64, 64, 4, 3)
                                                                    else:
                                                                        return (64, 128, 4, 2)
                                                            else:
                                                                return (64, 128, 4, 2)
                                                        else:
                                                            if f['group'] <= 6:
                                                                if f['max_seqlen_q'] <= 384:
                                                                    return (64, 128, 4, 2)
                                                                else:
                                                                    return (128, 128, 8, 2)
                                                            else:
                                                                return (128, 128, 8, 2)
                                                    else:
                                                        if f['programs'] <= 192:
                                                            if f['num_kv_heads'] <= 1:
                                                                return (64, 128, 4, 2)
                                                            else:
                                                                return (128, 128, 8, 3)
                                                        else:
                                                            return (128, 128, 8, 2)
                                            else:
                                                if f['num_tokens'] <= 1283:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    if f['group'] <= 2:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        if f['programs'] <= 768:
                                                            if f['num_seqs'] <= 4:
                                                                return (128, 128, 8, 3)
                                                            else:
                                                                return (64, 128, 4, 2)
                                                        else:
                                                            return (128, 128, 8, 3)
                                        else:
                                            if f['programs'] <= 96:
                                                if f['programs'] <= 48:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    return (64, 64, 4, 3)
                                            else:
                                                return (64, 128, 4, 2)
                                    else:
                                        if f['group'] <= 2:
                                            if f['num_seqs'] <= 4:
                                                if f['programs'] <= 80:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    return (128, 64, 8, 2)
                                            else:
                                                if f['programs'] <= 768:
                                                    if f['num_seqs'] <= 20:
                                                        if f['num_tokens'] <= 327:
                                                            return (64, 64, 4, 3)
                                                        else:
                                                            if f['programs'] <= 192:
                                                                if f['programs'] <= 48:
                                                                    return (64, 64, 4, 3)
                                                                else:
                                                                    return (64, 128, 4, 2)
                                                            else:
                                                                if f['num_kv_heads'] <= 5:
                                                                    return (64, 64, 4, 2)
                                                                else:
                                                                    return (128, 128, 8, 3)
                                                    else:
                                                        return (64, 64, 4, 3)
                                                else:
                                                    if f['num_seqs'] <= 20:
                                                        return (128, 64, 8, 3)
                                                    else:
                                                        if f['num_kv_heads'] <= 5:
                                                            if f['num_tokens'] <= 1359:
                                                                return (128, 32, 4, 3)
                                                            else:
                                                                return (64, 64, 4, 3)
                                                        else:
                                                            return (64, 64, 4, 3)
                                        else:
                                            if f['num_kv_heads'] <= 5:
                                                if f['num_seqs'] <= 20:
                                                    if f['programs'] <= 384:
                                                        if f['programs'] <= 48:
                                                            if f['max_seqlen_q'] <= 192:
                                                                return (64, 64, 4, 3)
                                                            else:
                                                                return (64, 64, 4, 2)
                                                        else:
                                                            if f['programs'] <= 192:
                                                                if f['max_seqlen_q'] <= 320:
                                                                    if f['num_kv_heads'] <= 1:
                                                                        return (64, 128, 4, 2)
                                                                    else:
                                                                        return (64, 64, 4, 3)
                                                                else:
                                                                    if f['programs'] <= 96:
                                                                        return (64, 128, 4, 2)
                                                                    else:
                                                                        if f['group'] <= 6:
                                                                            return (64, 128, 4, 2)
                                                                        else:
                                                                            return (128, 64, 8, 2)
                                                            else:
                                                                if f['num_seqs'] <= 4:
                                                                    return (128, 64, 8, 2)
                                                                else:
                                                                    return (64, 64, 4, 2)
                                                    else:
                                                        if f['group'] <= 6:
                                                            if f['programs'] <= 768:
                                                                return (64, 64, 4, 2)
                                                            else:
                                                                return (128, 64, 8, 3)
                                                        else:
                                                            return (64, 64, 4, 2)
                                                else:
                                                    if f['group'] <= 6:
                                                        if f['num_seqs'] <= 80:
                                                            if f['max_seqlen_q'] <= 1280:
                                                                return (64, 64, 4, 3)
                                                            else:
                                                                return (128, 64, 8, 3)
                                                        else:
                                                            if f['max_seqlen_q'] <= 320:
                                                                return (128, 64, 8, 3)
                                                            else:
                                                                return (64, 64, 4, 3)
                                                    else:
                                                        if f['num_kv_heads'] <= 1:
                                                            if f['num_seqs'] <= 80:
                                                                return (64, 64, 4, 3)
                                                            else:
                                                                return (128, 32, 4, 3)
                                                        else:
                                                            return (64, 64, 4, 3)
                                            else:
                                                if f['programs'] <= 192:
                                                    if f['programs'] <= 96:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        return (128, 64, 8, 2)
                                                else:
                                                    if f['num_seqs'] <= 20:
                                                        if f['programs'] <= 384:
                                                            if f['num_tokens'] <= 323:
                                                                return (128, 64, 8, 3)
                                                            else:
                                                                return (128, 64, 8, 2)
                                                        else:
                                                            return (128, 64, 8, 3)
                                                    else:
                                                        return (64, 64, 4, 3)
                                else:
                                    if f['programs'] <= 48:
                                        if f['max_seqlen_k'] <= 81920:
                                            if f['kv_bits'] <= 12:
                                                if f['num_seqs'] <= 20:
                                                    if f['num_kv_heads'] <= 5:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        if f['max_seqlen_k'] <= 20480:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return (64, 64, 4, 3)
                                                else:
                                                    return (64, 64, 4, 3)
                                            else:
                                                if f['num_kv_heads'] <= 5:
                                                    if f['max_seqlen_k'] <= 20480:
                                                        if f['num_seqs'] <= 4:
                                                            return (64, 64, 4, 2)
                                                        else:
                                                            return (64, 64, 4, 3)
                                                    else:
                                                        if f['num_kv_heads'] <= 1:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return (64, 64, 4, 3)
                                                else:
                                                    if f['max_seqlen_k'] <= 20480:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        return 'hand'
                                        else:
                                            if f['num_kv_heads'] <= 5:
                                                return (64, 64, 4, 3)
                                            else:
                                                if f['kv_bits'] <= 12:
                                                    return (64, 64, 4, 3)
                                                else:
                                                    return 'hand'
                                    else:
                                        if f['num_seqs'] <= 4:
                                            if f['programs'] <= 96:
                                                if f['num_kv_heads'] <= 1:
                                                    if f['kv_bits'] <= 12:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        if f['max_seqlen_k'] <= 20480:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return 'hand'
                                                else:
                                                    if f['kv_bits'] <= 12:
                                                        if f['max_seqlen_k'] <= 81920:
                                                            if f['group'] <= 6:
                                                                return 'hand'
                                                            else:
                                                                return (64, 128, 4, 2)
                                                        else:
                                                            return 'hand'
                                                    else:
                                                        if f['max_seqlen_k'] <= 81920:
                                                            if f['num_kv_heads'] <= 5:
                                                                if f['max_seqlen_k'] <= 20480:
                                                                    return (64, 128, 4, 2)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                return 'hand'
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (64, 128, 4, 2)
                                                            else:
                                                                return 'hand'
                                            else:
                                                return 'hand'
                                        else:
                                            if f['kv_bits'] <= 12:
                                                if f['num_seqs'] <= 80:
                                                    if f['programs'] <= 96:
                                                        if f['group'] <= 6:
                                                            return (64, 64, 4, 3)
                                                        else:
                                                            return (64, 128, 4, 2)
                                                    else:
                                                        if f['group'] <= 2:
                                                            if f['num_tokens'] <= 2067:
                                                                if f['num_tokens'] <= 531:
                                                                    if f['max_seqlen_q'] <= 320:
                                                                        return (64, 64, 4, 3)
                                                                    else:
                                                                        return 'hand'
                                                                else:
                                                                    return (64, 128, 4, 2)
                                                            else:
                                                                if f['num_kv_heads'] <= 1:
                                                                    return (64, 64, 4, 3)
                                                                else:
                                                                    return (64, 128, 4, 2)
                                                        else:
                                                            if f['group'] <= 6:
                                                                if f['programs'] <= 192:
                                                                    if f['num_seqs'] <= 20:
                                                                        return (64, 128, 4, 2)
                                                                    else:
                                                                        return (64, 64, 4, 3)
                                                                else:
                                                                    if f['num_tokens'] <= 147:
                                                                        return 'hand'
                                                                    else:
                                                                        if f['programs'] <= 1536:
                                                                            if f['programs'] <= 384:
                                                                                if f['num_tokens'] <= 339:
                                                                                    return (64, 64, 4, 3)
                                                                                else:
                                                                                    return (64, 128, 4, 2)
                                                                            else:
                                                                                if f['max_seqlen_q'] <= 1280:
                                                                                    return (64, 128, 4, 2)
                                                                                else:
                                                                                    if f['num_kv_heads'] <= 1:
                                                                                        return (64, 128, 4, 2)
                                                                                    else:
                                                                                        return 'hand'
                                                                        else:
                                                                            return 'hand'
                                                            else:
                                                                if f['max_seqlen_q'] <= 1280:
                                                                    return (64, 128, 4, 2)
                                                                else:
                                                                    return 'hand'
                                                else:
                                                    if f['programs'] <= 192:
                                                        return 'hand'
                                                    else:
                                                        return (64, 128, 4, 2)
                                            else:
                                                if f['num_tokens'] <= 2067:
                                                    if f['num_tokens'] <= 207:
                                                        if f['group'] <= 2:
                                                            if f['programs'] <= 160:
                                                                return 'hand'
                                                            else:
                                                                return (64, 64, 4, 3)
                                                        else:
                                                            if f['num_tokens'] <= 147:
                                                                if f['programs'] <= 96:
                                                                    return (64, 64, 4, 3)
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                if f['num_kv_heads'] <= 1:
                                                                    return (64, 64, 4, 3)
                                                                else:
                                                                    if f['programs'] <= 768:
                                                                        return 'hand'
                                                                    else:
                                                                        return (64, 64, 4, 3)
                                                    else:
                                                        if f['programs'] <= 1536:
                                                            if f['num_kv_heads'] <= 1:
                                                                if f['num_seqs'] <= 80:
                                                                    if f['group'] <= 6:
                                                                        if f['num_tokens'] <= 531:
                                                                            return (64, 64, 4, 3)
                                                                        else:
                                                                            if f['max_seqlen_q'] <= 1280:
                                                                                if f['programs'] <= 320:
                                                                                    return 'hand'
                                                                                else:
                                                                                    return (64, 64, 4, 3)
                                                                            else:
                                                                                if f['programs'] <= 320:
                                                                                    return (64, 64, 4, 3)
                                                                                else:
                                                                                    return 'hand'
                                                                    else:
                                                                        return 'hand'
                                                                else:
                                                                    return 'hand'
                                                            else:
                                                                if f['num_kv_heads'] <= 5:
                                                                    return 'hand'
                                                                else:
                                                                    if f['num_tokens'] <= 531:
                                                                        return 'hand'
                                                                    else:
                                                                        if f['num_seqs'] <= 20:
                                                                            return 'hand'
                                                                        else:
                                                                            return (64, 64, 4, 3)
                                                        else:
                                                            if f['num_seqs'] <= 80:
                                                                return 'hand'
                                                            else:
                                                                return (64, 64, 4, 3)
                                                else:
                                                    if f['num_kv_heads'] <= 1:
                                                        if f['num_tokens'] <= 2127:
                                                            return 'hand'
                                                        else:
                                                            return (64, 64, 4, 3)
                                                    else:
                                                        return (128, 64, 8, 3)
                else:
                    if f['kv_bits'] <= 12:
                        if f['head_dim'] <= 96:
                            if f['num_kv_heads'] <= 1:
                                if f['max_seqlen_k'] <= 5120:
                                    return (64, 128, 4, 2)
                                else:
                                    if f['programs'] <= 12288:
                                        if f['group'] <= 6:
                                            if f['block_size'] <= 40:
                                                return (64, 128, 4, 2)
                                            else:
                                                return (64, 64, 4, 3)
                                        else:
                                            return (64, 128, 4, 2)
                                    else:
                                        return (64, 64, 4, 3)
                            else:
                                if f['programs'] <= 6144:
                                    if f['num_seqs'] <= 80:
                                        if f['num_kv_heads'] <= 5:
                                            if f['max_seqlen_k'] <= 5120:
                                                return (64, 128, 4, 2)
                                            else:
                                                return (64, 64, 4, 3)
                                        else:
                                            if f['num_seqs'] <= 20:
                                                return (64, 64, 4, 3)
                                            else:
                                                if f['block_size'] <= 40:
                                                    if f['max_seqlen_k'] <= 5120:
                                                        if f['max_seqlen_q'] <= 1280:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return (64, 64, 4, 3)
                                                    else:
                                                        return (64, 128, 4, 2)
                                                else:
                                                    return (64, 128, 4, 2)
                                    else:
                                        return (64, 64, 4, 3)
                                else:
                                    if f['num_kv_heads'] <= 5:
                                        if f['group'] <= 6:
                                            if f['max_seqlen_k'] <= 5120:
                                                return (64, 64, 4, 3)
                                            else:
                                                if f['block_size'] <= 40:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    return (64, 64, 4, 3)
                                        else:
                                            if f['num_seqs'] <= 80:
                                                if f['max_seqlen_k'] <= 5120:
                                                    if f['block_size'] <= 40:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        return (64, 64, 4, 3)
                                                else:
                                                    return (64, 64, 4, 3)
                                            else:
                                                return (64, 64, 4, 3)
                                    else:
                                        return (64, 64, 4, 3)
                        else:
                            if f['num_kv_heads'] <= 1:
                                if f['num_seqs'] <= 80:
                                    if f['block_size'] <= 40:
                                        return (64, 128, 4, 2)
                                    else:
                                        if f['max_seqlen_k'] <= 5120:
                                            return (128, 128, 8, 3)
                                        else:
                                            return 'hand'
                                else:
                                    return (64, 128, 4, 2)
                            else:
                                if f['num_seqs'] <= 20:
                                    if f['max_seqlen_k'] <= 5120:
                                        return (64, 128, 4, 2)
                                    else:
                                        if f['group'] <= 6:
                                            if f['block_size'] <= 40:
                                                return 'hand'
                                            else:
                                                return (64, 128, 4, 2)
                                        else:
                                            return (64, 128, 4, 2)
                                else:
                                    return (64, 128, 4, 2)
                    else:
                        if f['num_kv_heads'] <= 1:
                            if f['head_dim'] <= 96:
                                if f['max_seqlen_k'] <= 5120:
                                    return (64, 128, 4, 2)
                                else:
                                    if f['num_seqs'] <= 80:
                                        if f['block_size'] <= 40:
                                            return (64, 128, 4, 2)
                                        else:
                                            return (64, 64, 4, 3)
                                    else:
                                        return (64, 64, 4, 3)
                            else:
                                if f['programs'] <= 12288:
                                    if f['num_seqs'] <= 80:
                                        if f['max_seqlen_k'] <= 5120:
                                            return (128, 64, 8, 3)
                                        else:
                                            return 'hand'
                                    else:
                                        return (64, 64, 4, 3)
                                else:
                                    if f['max_seqlen_k'] <= 5120:
                                        return (64, 64, 4, 3)
                                    else:
                                        return 'hand'
                        else:
                            if f['num_seqs'] <= 80:
                                if f['num_kv_heads'] <= 5:
                                    if f['max_seqlen_k'] <= 5120:
                                        if f['head_dim'] <= 96:
                                            return (64, 128, 4, 2)
                                        else:
                                            return (128, 64, 8, 3)
                                    else:
                                        if f['head_dim'] <= 96:
                                            if f['block_size'] <= 40:
                                                if f['group'] <= 6:
                                                    return (64, 64, 4, 3)
                                                else:
                                                    return (128, 64, 8, 3)
                                            else:
                                                return (64, 64, 4, 3)
                                        else:
                                            return 'hand'
                                else:
                                    if f['num_seqs'] <= 20:
                                        if f['head_dim'] <= 96:
                                            if f['max_seqlen_k'] <= 5120:
                                                if f['programs'] <= 6144:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (128, 64, 8, 3)
                                                    else:
                                                        return (64, 64, 4, 3)
                                            else:
                                                return (64, 64, 4, 3)
                                        else:
                                            if f['block_size'] <= 40:
                                                if f['group'] <= 6:
                                                    if f['max_seqlen_k'] <= 5120:
                                                        return (128, 128, 8, 2)
                                                    else:
                                                        return 'hand'
                                                else:
                                                    if f['max_seqlen_k'] <= 5120:
                                                        return (128, 64, 8, 3)
                                                    else:
                                                        return (128, 128, 8, 2)
                                            else:
                                                if f['max_seqlen_k'] <= 5120:
                                                    return (128, 64, 8, 3)
                                                else:
                                                    return 'hand'
                                    else:
                                        if f['programs'] <= 24576:
                                            return (64, 64, 4, 3)
                                        else:
                                            if f['max_seqlen_k'] <= 5120:
                                                return (64, 64, 4, 3)
                                            else:
                                                if f['head_dim'] <= 96:
                                                    return (64, 64, 4, 3)
                                                else:
                                                    return 'hand'
                            else:
                                if f['programs'] <= 24576:
                                    return (64, 64, 4, 3)
                                else:
                                    if f['max_seqlen_k'] <= 5120:
                                        return (64, 64, 4, 3)
                                    else:
                                        if f['head_dim'] <= 96:
                                            return (64, 64, 4, 3)
                                        else:
                                            if f['max_seqlen_q'] <= 1280:
                                                return (64, 64, 4, 3)
                                            else:
                                                if f['group'] <= 6:
                                                    return (64, 64, 4, 3)
                                                else:
                                                    return 'hand'
            else:
                if f['kv_bits'] <= 12:
                    if f['head_dim'] <= 96:
                        if f['programs'] <= 384:
                            if f['num_seqs'] <= 3:
                                if f['max_seqlen_k'] <= 3072:
                                    if f['num_kv_heads'] <= 1:
                                        return (64, 128, 4, 2)
                                    else:
                                        if f['group'] <= 2:
                                            return (64, 128, 4, 2)
                                        else:
                                            return (64, 64, 4, 2)
                                else:
                                    return (64, 128, 4, 2)
                            else:
                                if f['max_seqlen_q'] <= 6144:
                                    if f['block_size'] <= 40:
                                        if f['programs'] <= 192:
                                            return (64, 128, 4, 2)
                                        else:
                                            if f['max_seqlen_k'] <= 3072:
                                                return (64, 64, 4, 2)
                                            else:
                                                return (64, 128, 4, 2)
                                    else:
                                        return (64, 128, 4, 2)
                                else:
                                    if f['block_size'] <= 40:
                                        return (64, 128, 4, 2)
                                    else:
                                        return (64, 64, 4, 2)
                        else:
                            if f['group'] <= 6:
                                if f['num_kv_heads'] <= 1:
                                    if f['max_seqlen_k'] <= 6144:
                                        if f['num_seqs'] <= 6:
                                            return (64, 128, 4, 2)
                                        else:
                                            if f['programs'] <= 768:
                                                return (64, 64, 4, 2)
                                            else:
                                                return (128, 64, 4, 2)
                                    else:
                                        return (128, 64, 4, 2)
                                else:
                                    if f['block_size'] <= 40:
                                        if f['programs'] <= 768:
                                            if f['max_seqlen_k'] <= 3072:
                                                if f['group'] <= 2:
                                                    return (64, 64, 4, 3)
                                                else:
                                                    return (64, 64, 4, 2)
                                            else:
                                                if f['group'] <= 2:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    if f['max_seqlen_k'] <= 6144:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        return (128, 64, 4, 2)
                                        else:
                                            if f['max_seqlen_q'] <= 3072:
                                                if f['programs'] <= 1536:
                                                    return (64, 64, 4, 3)
                                                else:
                                                    if f['group'] <= 2:
                                                        return (64, 64, 4, 3)
                                                    else:
                                                        return (128, 64, 4, 2)
                                            else:
                                                if f['num_kv_heads'] <= 5:
                                                    if f['num_tokens'] <= 24576:
                                                        return (128, 64, 4, 2)
                                                    else:
                                                        if f['num_seqs'] <= 3:
                                                            return (128, 64, 4, 2)
                                                        else:
                                                            if f['max_seqlen_k'] <= 6144:
                                                                return (128, 64, 4, 2)
                                                            else:
                                                                return (64, 64, 4, 3)
                                                else:
                                                    return (64, 64, 4, 3)
                                    else:
                                        if f['programs'] <= 1536:
                                            if f['max_seqlen_k'] <= 12288:
                                                if f['max_seqlen_q'] <= 3072:
                                                    if f['num_tokens'] <= 12288:
                                                        return (64, 64, 4, 2)
                                                    else:
                                                        if f['group'] <= 2:
                                                            return (64, 64, 4, 3)
                                                        else:
                                                            return (128, 64, 4, 2)
                                                else:
                                                    if f['num_tokens'] <= 6144:
                                                        return (64, 64, 4, 3)
                                                    else:
                                                        if f['group'] <= 2:
                                                            if f['programs'] <= 768:
                                                                return (64, 128, 4, 2)
                                                            else:
                                                                return (64, 64, 4, 3)
                                                        else:
                                                            if f['num_seqs'] <= 3:
                                                                if f['max_seqlen_q'] <= 6144:
                                                                    return 'hand'
                                                                else:
                                                                    return (128, 64, 4, 2)
                                                            else:
                                                                return (64, 128, 4, 2)
                                            else:
                                                if f['group'] <= 2:
                                                    return 'hand'
                                                else:
                                                    return (128, 64, 4, 2)
                                        else:
                                            if f['max_seqlen_k'] <= 3072:
                                                if f['group'] <= 2:
                                                    return (64, 64, 4, 3)
                                                else:
                                                    return (128, 64, 4, 2)
                                            else:
                                                if f['num_kv_heads'] <= 5:
                                                    return (128, 64, 4, 2)
                                                else:
                                                    return (64, 64, 4, 3)
                            else:
                                if f['programs'] <= 12288:
                                    if f['num_tokens'] <= 6144:
                                        if f['num_kv_heads'] <= 5:
                                            return (64, 128, 4, 2)
                                        else:
                                            if f['block_size'] <= 40:
                                                if f['num_seqs'] <= 1:
                                                    return (64, 64, 4, 3)
                                                else:
                                                    return (128, 64, 4, 2)
                                            else:
                                                return (128, 64, 4, 2)
                                    else:
                                        if f['num_kv_heads'] <= 5:
                                            if f['programs'] <= 768:
                                                if f['num_seqs'] <= 3:
                                                    return (128, 64, 4, 2)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (64, 64, 4, 2)
                                                    else:
                                                        return (64, 128, 4, 2)
                                            else:
                                                return (128, 64, 4, 2)
                                        else:
                                            if f['num_seqs'] <= 3:
                                                if f['block_size'] <= 40:
                                                    return (64, 64, 4, 3)
                                                else:
                                                    if f['num_seqs'] <= 1:
                                                        return (128, 64, 4, 2)
                                                    else:
                                                        if f['num_tokens'] <= 12288:
                                                            return (128, 64, 4, 2)
                                                        else:
                                                            return (64, 64, 4, 3)
                                            else:
                                                return (128, 64, 4, 2)
                                else:
                                    if f['max_seqlen_q'] <= 6144:
                                        return (128, 64, 4, 2)
                                    else:
                                        return (64, 64, 4, 3)
                    else:
                        if f['block_size'] <= 40:
                            if f['programs'] <= 1536:
                                if f['group'] <= 2:
                                    if f['programs'] <= 96:
                                        return (64, 128, 4, 2)
                                    else:
                                        if f['num_kv_heads'] <= 5:
                                            return (128, 128, 8, 2)
                                        else:
                                            if f['num_seqs'] <= 3:
                                                return (128, 128, 8, 2)
                                            else:
                                                return (64, 128, 4, 2)
                                else:
                                    if f['max_seqlen_q'] <= 6144:
                                        return (128, 128, 8, 2)
                                    else:
                                        if f['group'] <= 6:
                                            if f['num_kv_heads'] <= 1:
                                                if f['num_seqs'] <= 3:
                                                    if f['programs'] <= 384:
                                                        return 'hand'
                                                    else:
                                                        if f['num_tokens'] <= 24576:
                                                            return (128, 128, 8, 2)
                                                        else:
                                                            return 'hand'
                                                else:
                                                    return (128, 128, 8, 2)
                                            else:
                                                return (128, 128, 8, 2)
                                        else:
                                            return (128, 128, 8, 2)
                            else:
                                if f['programs'] <= 3072:
                                    if f['num_kv_heads'] <= 1:
                                        if f['max_seqlen_q'] <= 6144:
                                            return (128, 128, 8, 2)
                                        else:
                                            if f['max_seqlen_q'] <= 12288:
                                                return (64, 128, 4, 2)
                                            else:
                                                return (128, 128, 8, 2)
                                    else:
                                        if f['num_tokens'] <= 12288:
                                            if f['max_seqlen_q'] <= 6144:
                                                return (128, 128, 8, 2)
                                            else:
                                                return (128, 64, 4, 2)
                                        else:
                                            if f['max_seqlen_k'] <= 12288:
                                                if f['group'] <= 2:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    if f['num_seqs'] <= 6:
                                                        if f['num_tokens'] <= 24576:
                                                            return (64, 128, 4, 2)
                                                        else:
                                                            return (128, 64, 4, 2)
                                                    else:
                                                        return (128, 128, 8, 2)
                                            else:
                                                if f['num_kv_heads'] <= 5:
                                                    if f['num_seqs'] <= 1:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        return (128, 64, 4, 2)
                                                else:
                                                    return (128, 128, 8, 2)
                                else:
                                    if f['programs'] <= 12288:
                                        if f['num_kv_heads'] <= 5:
                                            if f['num_seqs'] <= 3:
                                                return (128, 128, 8, 2)
                                            else:
                                                if f['max_seqlen_q'] <= 3072:
                                                    return (128, 128, 8, 2)
                                                else:
                                                    if f['num_seqs'] <= 6:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        return (128, 64, 4, 2)
                                        else:
                                            if f['num_tokens'] <= 12288:
                                                if f['num_seqs'] <= 3:
                                                    return (128, 64, 4, 2)
                                                else:
                                                    return (64, 128, 4, 2)
                                            else:
                                                if f['max_seqlen_k'] <= 3072:
                                                    if f['group'] <= 6:
                                                        return (128, 64, 4, 2)
                                                    else:
                                                        return (64, 128, 4, 2)
                                                else:
                                                    return (128, 64, 4, 2)
                                    else:
                                        if f['max_seqlen_k'] <= 12288:
                                            if f['num_seqs'] <= 6:
                                                return (64, 128, 4, 2)
                                            else:
                                                if f['num_seqs'] <= 12:
                                                    return (128, 64, 4, 2)
                                                else:
                                                    return (64, 128, 4, 2)
                                        else:
                                            return (128, 64, 4, 2)
                        else:
                            if f['max_seqlen_k'] <= 3072:
                                if f['programs'] <= 96:
                                    return (64, 128, 4, 2)
                                else:
                                    if f['num_kv_heads'] <= 1:
                                        if f['group'] <= 2:
                                            return (128, 128, 8, 2)
                                        else:
                                            if f['programs'] <= 1536:
                                                if f['group'] <= 6:
                                                    if f['num_seqs'] <= 6:
                                                        if f['num_tokens'] <= 6144:
                                                            return (128, 128, 8, 3)
                                                        else:
                                                            return (128, 128, 8, 2)
                                                    else:
                                                        return (128, 128, 8, 3)
                                                else:
                                                    return (128, 128, 8, 3)
                                            else:
                                                return (128, 128, 8, 2)
                                    else:
                                        if f['num_seqs'] <= 6:
                                            if f['programs'] <= 192:
                                                return (128, 128, 8, 2)
                                            else:
                                                if f['programs'] <= 1536:
                                                    return (128, 128, 8, 3)
                                                else:
                                                    if f['num_tokens'] <= 6144:
                                                        return (128, 128, 8, 2)
                                                    else:
                                                        return (128, 128, 8, 3)
                                        else:
                                            if f['num_kv_heads'] <= 5:
                                                if f['group'] <= 2:
                                                    return (128, 128, 8, 2)
                                                else:
                                                    return (128, 128, 8, 3)
                                            else:
                                                if f['group'] <= 2:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    return (128, 64, 4, 2)
                            else:
                                if f['programs'] <= 96:
                                    return (64, 128, 4, 2)
                                else:
                                    return 'hand'
                else:
                    if f['programs'] <= 768:
                        if f['head_dim'] <= 96:
                            if f['programs'] <= 384:
                                return (64, 128, 4, 2)
                            else:
                                if f['group'] <= 2:
                                    if f['block_size'] <= 40:
                                        return (64, 128, 4, 2)
                                    else:
                                        if f['num_kv_heads'] <= 5:
                                            if f['max_seqlen_q'] <= 3072:
                                                return (64, 64, 4, 2)
                                            else:
                                                return (128, 64, 8, 3)
                                        else:
                                            return (64, 128, 4, 2)
                                else:
                                    if f['num_tokens'] <= 12288:
                                        if f['block_size'] <= 40:
                                            if f['num_kv_heads'] <= 1:
                                                if f['max_seqlen_q'] <= 3072:
                                                    return (128, 64, 8, 2)
                                                else:
                                                    return (128, 64, 4, 2)
                                            else:
                                                return (128, 64, 8, 2)
                                        else:
                                            if f['max_seqlen_k'] <= 6144:
                                                if f['num_tokens'] <= 6144:
                                                    if f['max_seqlen_q'] <= 3072:
                                                        return (64, 64, 4, 2)
                                                    else:
                                                        return (128, 64, 4, 2)
                                                else:
                                                    return (128, 64, 4, 2)
                                            else:
                                                if f['group'] <= 6:
                                                    return (128, 64, 8, 2)
                                                else:
                                                    return (128, 64, 4, 2)
                                    else:
                                        if f['num_seqs'] <= 3:
                                            return (128, 64, 8, 2)
                                        else:
                                            if f['block_size'] <= 40:
                                                return (128, 64, 8, 2)
                                            else:
                                                return (128, 64, 4, 2)
                        else:
                            if f['programs'] <= 192:
                                if f['num_seqs'] <= 3:
                                    if f['group'] <= 2:
                                        if f['num_seqs'] <= 1:
                                            if f['programs'] <= 96:
                                                return (64, 128, 4, 2)
                                            else:
                                                if f['max_seqlen_k'] <= 12288:
                                                    if f['block_size'] <= 40:
                                                        return 'hand'
                                                    else:
                                                        return (64, 128, 4, 2)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        return 'hand'
                                        else:
                                            if f['programs'] <= 96:
                                                if f['programs'] <= 48:
                                                    if f['block_size'] <= 40:
                                                        return (64, 128, 4, 2)
                                                    else:
                                                        return (64, 64, 4, 2)
                                                else:
                                                    return (64, 128, 4, 2)
                                            else:
                                                if f['max_seqlen_q'] <= 6144:
                                                    return 'hand'
                                                else:
                                                    return (64, 128, 4, 2)
                                    else:
                                        if f['max_seqlen_k'] <= 3072:
                                            return (128, 64, 8, 2)
                                        else:
                                            return 'hand'
                                else:
                                    if f['num_kv_heads'] <= 1:
                                        if f['programs'] <= 96:
                                            return (64, 128, 4, 2)
                                        else:
                                            if f['num_seqs'] <= 6:
                                                return 'hand'
                                            else:
                                                if f['block_size'] <= 40:
                                                    return (128, 128, 8, 2)
                                                else:
                                                    return (128, 64, 8, 2)
                                    else:
                                        if f['block_size'] <= 40:
                                            return (128, 128, 8, 2)
                                        else:
                                            return (128, 64, 8, 2)
                            else:
                                if f['group'] <= 2:
                                    if f['max_seqlen_q'] <= 3072:
                                        if f['block_size'] <= 40:
                                            return (128, 128, 8, 2)
                                        else:
                                            if f['num_seqs'] <= 6:
                                                return (128, 64, 8, 3)
                                            else:
                                                if f['programs'] <= 384:
                                                    return (64, 64, 4, 2)
                                                else:
                                                    return (128, 64, 8, 3)
                                    else:
                                        if f['max_seqlen_k'] <= 6144:
                                            if f['programs'] <= 384:
                                                return 'hand'
                                            else:
                                                if f['block_size'] <= 40:
                                                    return (128, 128, 8, 2)
                                                else:
                                                    return 'hand'
                                        else:
                                            return 'hand'
                                else:
                                    if f['block_size'] <= 40:
                                        if f['programs'] <= 384:
                                            if f['max_seqlen_q'] <= 6144:
                                                if f['group'] <= 6:
                                                    return (128, 128, 8, 2)
                                                else:
                                                    if f['max_seqlen_q'] <= 3072:
                                                        return (128, 64, 8, 2)
                                                    else:
                                                        return (128, 128, 8, 2)
                                            else:
                                                return 'hand'
                                        else:
                                            return (128, 128, 8, 2)
                                    else:
                                        if f['max_seqlen_q'] <= 3072:
                                            if f['programs'] <= 384:
                                                return (128, 64, 8, 2)
                                            else:
                                                return (128, 64, 8, 3)
                                        else:
                                            if f['max_seqlen_q'] <= 6144:
                                                if f['programs'] <= 384:
                                                    return 'hand'
                                                else:
                                                    return (128, 64, 8, 3)
                                            else:
                                                return 'hand'
                    else:
                        if f['head_dim'] <= 96:
                            if f['programs'] <= 1536:
                                if f['group'] <= 6:
                                    if f['max_seqlen_k'] <= 12288:
                                        return (128, 64, 8, 3)
                                    else:
                                        if f['block_size'] <= 40:
                                            return (128, 64, 8, 3)
                                        else:
                                            if f['num_tokens'] <= 24576:
                                                if f['num_kv_heads'] <= 5:
                                                    return (128, 64, 8, 2)
                                                else:
                                                    return (128, 64, 8, 3)
                                            else:
                                                return (128, 64, 8, 3)
                                else:
                                    if f['block_size'] <= 40:
                                        return (128, 64, 8, 3)
                                    else:
                                        if f['num_tokens'] <= 12288:
                                            if f['num_seqs'] <= 3:
                                                return (128, 64, 8, 3)
                                            else:
                                                return (128, 64, 4, 2)
                                        else:
                                            if f['num_seqs'] <= 3:
                                                return (128, 64, 4, 2)
                                            else:
                                                if f['max_seqlen_k'] <= 3072:
                                                    return (128, 64, 4, 2)
                                                else:
                                                    return (128, 64, 8, 3)
                            else:
                                if f['max_seqlen_q'] <= 12288:
                                    return (128, 64, 8, 3)
                                else:
                                    if f['programs'] <= 3072:
                                        return (128, 64, 8, 3)
                                    else:
                                        if f['num_kv_heads'] <= 5:
                                            if f['block_size'] <= 40:
                                                return (128, 64, 8, 2)
                                            else:
                                                return (128, 64, 8, 3)
                                        else:
                                            return (128, 64, 8, 3)
                        else:
                            if f['max_seqlen_q'] <= 6144:
                                if f['group'] <= 2:
                                    if f['block_size'] <= 40:
                                        return (128, 128, 8, 2)
                                    else:
                                        if f['max_seqlen_k'] <= 3072:
                                            if f['num_seqs'] <= 12:
                                                return (128, 64, 8, 3)
                                            else:
                                                return (128, 32, 4, 3)
                                        else:
                                            return 'hand'
                                else:
                                    if f['group'] <= 6:
                                        if f['num_seqs'] <= 6:
                                            if f['programs'] <= 3072:
                                                if f['num_seqs'] <= 1:
                                                    return (128, 64, 8, 3)
                                                else:
                                                    if f['num_seqs'] <= 3:
                                                        if f['block_size'] <= 40:
                                                            return (128, 128, 8, 2)
                                                        else:
                                                            return (128, 64, 8, 3)
                                                    else:
                                                        return (128, 64, 8, 3)
                                            else:
                                                if f['block_size'] <= 40:
                                                    return (128, 128, 8, 2)
                                                else:
                                                    return (128, 64, 8, 3)
                                        else:
                                            return (128, 64, 8, 3)
                                    else:
                                        if f['num_seqs'] <= 3:
                                            if f['block_size'] <= 40:
                                                return (128, 128, 8, 2)
                                            else:
                                                return (128, 64, 8, 3)
                                        else:
                                            if f['num_tokens'] <= 24576:
                                                if f['block_size'] <= 40:
                                                    if f['num_seqs'] <= 6:
                                                        return (128, 128, 8, 2)
                                                    else:
                                                        if f['num_kv_heads'] <= 1:
                                                            return (128, 128, 8, 2)
                                                        else:
                                                            return (128, 64, 8, 3)
                                                else:
                                                    return (128, 64, 8, 3)
                                            else:
                                                return (128, 64, 8, 3)
                            else:
                                if f['programs'] <= 6144:
                                    if f['num_seqs'] <= 1:
                                        if f['block_size'] <= 40:
                                            if f['group'] <= 2:
                                                return 'hand'
                                            else:
                                                if f['num_kv_heads'] <= 5:
                                                    if f['num_tokens'] <= 12288:
                                                        return (128, 128, 8, 2)
                                                    else:
                                                        if f['num_kv_heads'] <= 1:
                                                            return (128, 128, 8, 2)
                                                        else:
                                                            return 'hand'
                                                else:
                                                    return (128, 128, 8, 2)
                                        else:
                                            return 'hand'
                                    else:
                                        if f['programs'] <= 3072:
                                            if f['num_seqs'] <= 3:
                                                if f['max_seqlen_q'] <= 12288:
                                                    if f['num_kv_heads'] <= 5:
                                                        if f['block_size'] <= 40:
                                                            return 'hand'
                                                        else:
                                                            if f['group'] <= 6:
                                                                return (128, 64, 8, 3)
                                                            else:
                                                                return 'hand'
                                                    else:
                                                        return 'hand'
                                                else:
                                                    return 'hand'
                                            else:
                                                if f['block_size'] <= 40:
                                                    if f['num_kv_heads'] <= 5:
                                                        return 'hand'
                                                    else:
                                                        return (128, 128, 8, 2)
                                                else:
                                                    return 'hand'
                                        else:
                                            if f['block_size'] <= 40:
                                                return (128, 128, 8, 2)
                                            else:
                                                return 'hand'
                                else:
                                    if f['block_size'] <= 40:
                                        if f['group'] <= 6:
                                            if f['max_seqlen_k'] <= 12288:
                                                return (128, 64, 8, 3)
                                            else:
                                                return (128, 128, 8, 2)
                                        else:
                                            return (128, 128, 8, 2)
                                    else:
                                        return 'hand'
    else:
        if f['kv_bits'] <= 12:
            if f['programs'] <= 96:
                if f['group'] <= 6:
                    if f['max_seqlen_k'] <= 192:
                        if f['group'] <= 2:
                            return 'hand'
                        else:
                            if f['programs'] <= 48:
                                return 'hand'
                            else:
                                if f['block_size'] <= 40:
                                    return (64, 64, 4, 3)
                                else:
                                    return 'hand'
                    else:
                        if f['programs'] <= 6:
                            if f['block_size'] <= 40:
                                if f['max_seqlen_k'] <= 20480:
                                    if f['max_seqlen_k'] <= 1280:
                                        return (64, 64, 4, 3)
                                    else:
                                        return (64, 64, 4, 2)
                                else:
                                    if f['num_tokens'] <= 384:
                                        return (64, 64, 4, 3)
                                    else:
                                        if f['max_seqlen_k'] <= 81920:
                                            return (64, 64, 4, 2)
                                        else:
                                            return (64, 64, 4, 3)
                            else:
                                return (64, 64, 4, 3)
                        else:
                            if f['max_seqlen_q'] <= 3072:
                                if f['block_size'] <= 40:
                                    if f['programs'] <= 24:
                                        if f['num_kv_heads'] <= 1:
                                            if f['num_tokens'] <= 384:
                                                if f['max_seqlen_k'] <= 1152:
                                                    return (64, 64, 4, 3)
                                                else:
                                                    if f['max_seqlen_k'] <= 81920:
                                                        if f['max_seqlen_q'] <= 192:
                                                            if f['max_seqlen_k'] <= 5120:
                                                                return (64, 64, 4, 2)
                                                            else:
                                                                return (64, 64, 4, 3)
                                                        else:
                                                            return (64, 64, 4, 2)
                                                    else:
                                                        return (64, 64, 4, 3)
                                            else:
                                                if f['max_seqlen_q'] <= 1536:
                                                    return (64, 64, 4, 3)
                                                else:
                                                    if f['max_seqlen_k'] <= 20480:
                                                        return (64, 64, 4, 2)
                                                    else:
                                                        return (64, 64, 4, 3)
                                        else:
                                            return (64, 64, 4, 3)
                                    else:
                                        return (64, 64, 4, 3)
                                else:
                                    return (64, 64, 4, 3)
                            else:
                                if f['programs'] <= 48:
                                    if f['block_size'] <= 40:
                                        return (64, 64, 4, 2)
                                    else:
                                        return (64, 64, 4, 3)
                                else:
                                    return (64, 64, 4, 3)
                else:
                    if f['max_seqlen_k'] <= 192:
                        return 'hand'
                    else:
                        if f['max_seqlen_q'] <= 192:
                            if f['max_seqlen_k'] <= 5120:
                                return (64, 128, 4, 2)
                            else:
                                return (64, 64, 4, 3)
                        else:
                            if f['programs'] <= 48:
                                return (64, 128, 4, 2)
                            else:
                                if f['max_seqlen_k'] <= 5120:
                                    return (64, 128, 4, 2)
                                else:
                                    return (64, 64, 4, 3)
            else:
                if f['num_seqs'] <= 24:
                    if f['max_seqlen_k'] <= 3072:
                        if f['group'] <= 6:
                            if f['max_seqlen_k'] <= 768:
                                if f['num_tokens'] <= 771:
                                    if f['num_seqs'] <= 5:
                                        if f['block_size'] <= 40:
                                            return (128, 64, 8, 2)
                                        else:
                                            return (128, 128, 8, 2)
                                    else:
                                        if f['programs'] <= 640:
                                            return (64, 64, 4, 3)
                                        else:
                                            return (128, 64, 8, 2)
                                else:
                                    if f['block_size'] <= 40:
                                        return (128, 64, 8, 2)
                                    else:
                                        if f['max_seqlen_q'] <= 384:
                                            return (128, 64, 8, 2)
                                        else:
                                            if f['num_kv_heads'] <= 1:
                                                return (128, 64, 8, 2)
                                            else:
                                                if f['programs'] <= 768:
                                                    if f['num_tokens'] <= 6144:
                                                        return (128, 128, 8, 2)
                                                    else:
                                                        if f['group'] <= 2:
                                                            return (128, 128, 8, 2)
                                                        else:
                                                            return (128, 64, 8, 2)
                                                else:
                                                    return (128, 64, 8, 2)
                            else:
                                if f['num_tokens'] <= 323:
                                    return (64, 64, 4, 3)
                                else:
                                    if f['programs'] <= 1536:
                                        if f['num_tokens'] <= 3075:
                                            if f['num_kv_heads'] <= 5:
                                                if f['programs'] <= 768:
                                                    if f['max_seqlen_k'] <= 1536:
                                                        if f['block_size'] <= 40:
                                                            return (128, 64, 8, 2)
                                                        else:
                                                            return (128, 128, 8, 2)
                                                    else:
                                                        return (64, 64, 4, 3)
                                                else:
                                                    return (128, 128, 8, 2)
                                            else:
                                                if f['num_tokens'] <= 2051:
                                                    if f['num_seqs'] <= 5:
                                                        return (128, 128, 8, 2)
                                                    else:
                                                        if f['programs'] <= 640:
                                                            return (64, 64, 4, 3)
                                                        else:
                                                            return (128, 128, 8, 2)
                                                else:
                                                    if f['block_size'] <= 40:
                                                        return (64, 64, 4, 2)
                                                    else:
                                                        return (128, 128, 8, 2)
                                        else:
                                            if f['block_size'] <= 40:
                                                if f['group'] <= 2:
                                                    return (128, 128, 8, 2)
                                                else:
                                                    if f['max_seqlen_q'] <= 1536:
                                                        return (128, 64, 8, 2)
                                                    else:
                                                        if f['num_kv_heads'] <= 1:
                                                            if f['num_tokens'] <= 12288:
                                                                if f['programs'] <= 192:
                                                                    return (128, 64, 8, 2)
                                                                else:
                                                                    return (128, 128, 8, 2)
                                                            else:
                                                                return (128, 64, 8, 2)
                                                        else:
                                                            if f['programs'] <= 768:
                                                                if f['num_tokens'] <= 6144:
                                                                    return (128, 128, 8, 2)
                                                                else:
                                                                    return (128, 64, 8, 2)
                                                            else:
                                                                return (128, 128, 8, 2)
                                            else:
                                                return (128, 128, 8, 2)
                                    else:
                                        if f['block_size'] <= 40:
                                            if f['group'] <= 2:
                                                return (128, 128, 8, 2)
                                            else:
                                                if f['num_tokens'] <= 5123:
                                                    return (128, 128, 8, 2)
                                                else:
                                                    return (128, 64, 8, 2)
                                        else:
                                            return (128, 128, 8, 2)
                        else:
                            if f['num_tokens'] <= 771:
                                if f['num_kv_heads'] <= 5:
                                    if f['programs'] <= 192:
                                        if f['max_seqlen_k'] <= 1088:
                                            return (64, 128, 4, 2)
                                        else:
                                            return (64, 64, 4, 3)
                                    else:
                                        if f['num_kv_heads'] <= 1:
                                            return (64, 128, 4, 2)
                                        else:
                                            if f['max_seqlen_k'] <= 1280:
                                                return (64, 128, 4, 2)
                                            else:
                                                return (128, 128, 8, 2)
                                else:
                                    if f['max_seqlen_k'] <= 1280:
                                        if f['max_seqlen_q'] <= 192:
                                            if f['block_size'] <= 40:
                                                return (64, 128, 4, 2)
                                            else:
                                                return 'hand'
                                        else:
                                            if f['block_size'] <= 40:
                                                return (128, 64, 8, 2)
                                            else:
                                                if f['num_seqs'] <= 1:
                                                    return (128, 128, 8, 2)
                                                else:
                                                    return (128, 64, 8, 2)
                                    else:
                                        return (128, 128, 8, 2)
                            else:
                                if f['block_size'] <= 40:
                                    if f['num_seqs'] <= 1:
                                        if f['num_kv_heads'] <= 1:
                                            return (64, 128, 4, 2)
                                        else:
                                            if f['programs'] <= 768:
                                                return (128, 64, 8, 2)
                                            else:
                                                return (128, 128, 8, 2)
                                    else:
                                        if f['max_seqlen_k'] <= 1536:
                                            return (128, 64, 8, 2)
                                        else:
                                            if f['num_tokens'] <= 3075:
                                                if f['num_kv_heads'] <= 1:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    return (128, 64, 8, 2)
                                            else:
                                                if f['num_seqs'] <= 3:
                                                    if f['num_kv_heads'] <= 5:
                                                        return (128, 64, 8, 2)
                                                    else:
                                                        return (128, 128, 8, 2)
                                                else:
                                                    return (128, 64, 8, 2)
                                else:
                                    if f['max_seqlen_k'] <= 768:
                                        if f['programs'] <= 192:
                                            if f['num_kv_heads'] <= 1:
                                                if f['num_seqs'] <= 6:
                                                    return (128, 128, 8, 2)
                                                else:
                                                    return (128, 64, 8, 2)
                                            else:
                                                return (128, 64, 8, 2)
                                        else:
                                            return (128, 64, 8, 2)
                                    else:
                                        if f['programs'] <= 192:
                                            if f['max_seqlen_q'] <= 1536:
                                                return (128, 128, 8, 2)
                                            else:
                                                return (64, 64, 4, 3)
                                        else:
                                            return (128, 128, 8, 2)
                    else:
                        if f['num_seqs'] <= 6:
                            return (128, 128, 8, 2)
                        else:
                            if f['programs'] <= 384:
                                if f['max_seqlen_k'] <= 6144:
                                    return (128, 128, 8, 2)
                                else:
                                    if f['group'] <= 6:
                                        return (64, 64, 4, 3)
                                    else:
                                        if f['num_tokens'] <= 327:
                                            return (64, 64, 4, 3)
                                        else:
                                            if f['block_size'] <= 40:
                                                return (64, 64, 4, 3)
                                            else:
                                                return (128, 128, 8, 2)
                            else:
                                if f['block_size'] <= 40:
                                    if f['group'] <= 6:
                                        return (128, 128, 8, 2)
                                    else:
                                        if f['num_kv_heads'] <= 5:
                                            if f['num_kv_heads'] <= 1:
                                                return (128, 128, 8, 2)
                                            else:
                                                if f['max_seqlen_q'] <= 1280:
                                                    return (128, 128, 8, 2)
                                                else:
                                                    if f['max_seqlen_q'] <= 3072:
                                                        return (64, 64, 4, 2)
                                                    else:
                                                        return (128, 128, 8, 2)
                                        else:
                                            return (128, 128, 8, 2)
                                else:
                                    return (128, 128, 8, 2)
                else:
                    if f['num_seqs'] <= 80:
                        if f['programs'] <= 1536:
                            if f['max_seqlen_q'] <= 320:
                                if f['group'] <= 2:
                                    if f['max_seqlen_k'] <= 1088:
                                        return 'hand'
                                    else:
                                        return (64, 64, 4, 2)
                                else:
                                    if f['max_seqlen_k'] <= 1088:
                                        if f['num_kv_heads'] <= 5:
                                            if f['group'] <= 6:
                                                return 'hand'
                                            else:
                                                if f['block_size'] <= 40:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    return 'hand'
                                        else:
                                            return (64, 64, 4, 3)
                                    else:
                                        if f['block_size'] <= 40:
                                            if f['group'] <= 6:
                                                if f['programs'] <= 640:
                                                    return (64, 64, 4, 3)
                                                else:
                                                    if f['max_seqlen_k'] <= 5120:
                                                        return (64, 64, 4, 3)
                                                    else:
                                                        return (64, 64, 4, 2)
                                            else:
                                                if f['max_seqlen_k'] <= 5120:
                                                    return (64, 128, 4, 2)
                                                else:
                                                    return (64, 64, 4, 3)
                                        else:
                                            return (64, 64, 4, 3)
                            else:
                                if f['group'] <= 6:
                                    return (64, 64, 4, 3)
                                else:
                                    if f['max_seqlen_k'] <= 1280:
                                        return (64, 128, 4, 2)
                                    else:
                                        if f['max_seqlen_k'] <= 5120:
                                            return (64, 64, 4, 3)
                                        else:
                                            return (128, 128, 8, 2)
                        else:
                            if f['num_kv_heads'] <= 5:
                                if f['group'] <= 6:
                                    if f['num_kv_heads'] <= 1:
                                        return (64, 64, 4, 3)
                                    else:
                                        if f['block_size'] <= 40:
                                            return (64, 64, 4, 2)
                                        else:
                                            return (128, 128, 8, 2)
                                else:
                                    return (128, 128, 8, 2)
                            else:
                                if f['programs'] <= 24576:
                                    return (64, 64, 4, 2)
                                else:
                                    return (128, 128, 8, 2)
                    else:
                        if f['max_seqlen_k'] <= 5120:
                            if f['programs'] <= 192:
                                if f['max_seqlen_k'] <= 1088:
                                    return 'hand'
                                else:
                                    return (64, 64, 4, 2)
                            else:
                                if f['programs'] <= 768:
                                    if f['num_tokens'] <= 447:
                                        return (64, 64, 4, 2)
                                    else:
                                        if f['block_size'] <= 40:
                                            if f['max_seqlen_k'] <= 1280:
                                                return (64, 64, 4, 3)
                                            else:
                                                return (64, 64, 4, 2)
                                        else:
                                            if f['max_seqlen_k'] <= 1280:
                                                return (64, 64, 4, 2)
                                            else:
                                                return (64, 64, 4, 3)
                                else:
                                    return (64, 64, 4, 2)
                        else:
                            if f['num_kv_heads'] <= 5:
                                if f['group'] <= 2:
                                    if f['programs'] <= 3072:
                                        if f['num_tokens'] <= 447:
                                            return (64, 64, 4, 2)
                                        else:
                                            if f['programs'] <= 768:
                                                return (64, 64, 4, 3)
                                            else:
                                                return (64, 64, 4, 2)
                                    else:
                                        return (64, 64, 4, 3)
                                else:
                                    if f['num_kv_heads'] <= 1:
                                        return (64, 64, 4, 2)
                                    else:
                                        if f['programs'] <= 6144:
                                            if f['num_tokens'] <= 447:
                                                return (64, 64, 4, 2)
                                            else:
                                                if f['block_size'] <= 40:
                                                    return (64, 64, 4, 3)
                                                else:
                                                    return (64, 64, 4, 2)
                                        else:
                                            return (64, 64, 4, 2)
                            else:
                                return (64, 64, 4, 2)
        else:
            if f['max_seqlen_k'] <= 384:
                if f['group'] <= 2:
                    if f['programs'] <= 96:
                        return 'hand'
                    else:
                        if f['num_tokens'] <= 1151:
                            return 'hand'
                        else:
                            return (128, 64, 8, 2)
                else:
                    if f['num_tokens'] <= 255:
                        if f['num_kv_heads'] <= 1:
                            if f['num_seqs'] <= 80:
                                return 'hand'
                            else:
                                return (128, 64, 8, 2)
                        else:
                            return 'hand'
                    else:
                        if f['programs'] <= 24:
                            if f['group'] <= 6:
                                return 'hand'
                            else:
                                if f['block_size'] <= 40:
                                    return 'hand'
                                else:
                                    return (128, 64, 8, 2)
                        else:
                            if f['num_seqs'] <= 1:
                                if f['group'] <= 6:
                                    return 'hand'
                                else:
                                    return (128, 64, 8, 2)
                            else:
                                return (128, 64, 8, 2)
            else:
                return (128, 64, 8, 2)
