"""Paged-attention kernel knobs for NVIDIA H200 (132 SMs): generated, do not edit.

Fitted by ``python -m tritium.tune attention --hold-out-anchors --fit bench/results/tuning/attention-NVIDIA-H200.json``
(sha256 079ef1087effd92e; 120 decode-family and 54 prefill-family workloads,
swept 2026-11-24T02:57:01+00:00; tree depths {'decode': 6, 'prefill': 5};
cross-validated geometric-mean slowdown vs the best swept, tree vs hand rules: {'decode': {'tree': 1.092, 'hand': 1.164}, 'prefill': {'tree': 1.0742, 'hand': 1.5329}}).
Held-out validation (workloads the fit never saw):
    decode: 24 held out, 50% within 5% of the best swept, worst 1.533x the best and 1.096x the hand rules
    prefill: 11 held out, 36% within 5% of the best swept, worst 1.635x the best and 1.630x the hand rules
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
    if f['max_seqlen_k'] <= 1536:
        if f['num_tokens'] <= 3:
            if f['max_seqlen_k'] <= 320:
                if f['num_tokens'] <= 1:
                    return (128, 2, 1)
                else:
                    return (32, 2, 4)
            else:
                if f['head_dim'] <= 192:
                    return (64, 2, 4)
                else:
                    return (32, 2, 1)
        else:
            if f['max_seqlen_k'] <= 320:
                if f['programs'] <= 192:
                    if f['head_dim'] <= 192:
                        return (128, 2, 1)
                    else:
                        return (32, 2, 2)
                else:
                    return (32, 2, 0)
            else:
                if f['max_seqlen_k'] <= 768:
                    if f['programs'] <= 40:
                        return (32, 2, 8)
                    else:
                        return (128, 3, 0)
                else:
                    return (64, 3, 4)
    else:
        if f['head_dim'] <= 192:
            if f['programs'] <= 96:
                if f['programs'] <= 6:
                    if f['max_seqlen_k'] <= 81920:
                        if f['max_seqlen_k'] <= 20480:
                            return (64, 2, 4)
                        else:
                            return (128, 2, 4)
                    else:
                        return (128, 3, 1)
                else:
                    if f['max_seqlen_k'] <= 5120:
                        if f['head_dim'] <= 96:
                            return (64, 2, 4)
                        else:
                            return (64, 2, 2)
                    else:
                        if f['num_tokens'] <= 2:
                            return (32, 2, 4)
                        else:
                            return 'hand'
            else:
                if f['programs'] <= 192:
                    if f['head_dim'] <= 96:
                        if f['block_size'] <= 40:
                            return (128, 3, 2)
                        else:
                            return (64, 3, 8)
                    else:
                        return (128, 2, 1)
                else:
                    if f['kv_bits'] <= 12:
                        return (128, 2, 1)
                    else:
                        if f['max_seqlen_q'] <= 1:
                            return (128, 2, 1)
                        else:
                            return (128, 2, 0)
        else:
            if f['num_seqs'] <= 48:
                if f['max_seqlen_q'] <= 1:
                    if f['kv_bits'] <= 12:
                        if f['max_seqlen_k'] <= 20480:
                            return (32, 2, 2)
                        else:
                            return (32, 2, 4)
                    else:
                        return (64, 2, 8)
                else:
                    if f['max_seqlen_q'] <= 6:
                        return (32, 2, 2)
                    else:
                        return (32, 2, 4)
            else:
                return 'hand'


def prefill(f):
    if f['head_dim'] <= 192:
        if f['head_dim'] <= 96:
            if f['kv_bits'] <= 12:
                if f['max_seqlen_k'] <= 3072:
                    return (128, 128, 8, 2)
                else:
                    return (64, 64, 4, 3)
            else:
                if f['group'] <= 2:
                    return (64, 64, 4, 3)
                else:
                    if f['group'] <= 6:
                        return (64, 128, 4, 2)
                    else:
                        return (64, 64, 4, 3)
        else:
            if f['group'] <= 2:
                if f['kv_bits'] <= 12:
                    return (128, 128, 8, 2)
                else:
                    return 'hand'
            else:
                if f['programs'] <= 768:
                    return (128, 128, 8, 3)
                else:
                    if f['num_tokens'] <= 9216:
                        return 'hand'
                    else:
                        return (128, 128, 8, 2)
    else:
        if f['kv_bits'] <= 12:
            if f['programs'] <= 96:
                return (64, 64, 4, 3)
            else:
                if f['max_seqlen_k'] <= 9216:
                    return (64, 64, 4, 2)
                else:
                    return (128, 64, 8, 3)
        else:
            return (128, 64, 8, 2)
