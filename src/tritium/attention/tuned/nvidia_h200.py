"""Paged-attention kernel knobs for NVIDIA H200 (132 SMs): generated, do not edit.

Fitted by ``python -m tritium.tune attention --fit bench/results/tuning/attention-NVIDIA-H200.json``
(sha256 ae73f82cfa017bf9; 120 decode-family and 54 prefill-family workloads,
swept 2026-11-23T13:47:07+00:00; tree depths {'decode': 8, 'prefill': 3};
cross-validated geometric-mean slowdown vs the best swept, tree vs hand rules: {'decode': {'tree': 1.086, 'hand': 1.1354}, 'prefill': {'tree': 1.1, 'hand': 1.7444}}).
Held-out validation (workloads the fit never saw):
    decode: 24 held out, 54% within 5% of the best swept, worst 1.438x the best and 1.434x the hand rules
    prefill: 11 held out, 55% within 5% of the best swept, worst 1.348x the best and 1.340x the hand rules
"""

def decode(f):
    if f['max_seqlen_k'] <= 1536:
        if f['num_tokens'] <= 3:
            if f['max_seqlen_k'] <= 320:
                if f['kv_bits'] <= 12:
                    return (32, 2, 1)
                else:
                    return (32, 2, 8)
            else:
                if f['programs'] <= 3:
                    return (32, 2, 2)
                else:
                    return (32, 2, 1)
        else:
            if f['programs'] <= 96:
                if f['max_seqlen_k'] <= 320:
                    if f['head_dim'] <= 96:
                        if f['kv_bits'] <= 12:
                            return (128, 2, 8)
                        else:
                            return (128, 2, 4)
                    else:
                        if f['programs'] <= 40:
                            return (128, 2, 2)
                        else:
                            return (32, 2, 8)
                else:
                    return (64, 2, 1)
            else:
                if f['max_seqlen_q'] <= 1:
                    if f['num_tokens'] <= 192:
                        if f['max_seqlen_k'] <= 320:
                            if f['head_dim'] <= 96:
                                return (128, 2, 4)
                            else:
                                return (64, 2, 0)
                        else:
                            return (128, 2, 0)
                    else:
                        return (128, 2, 4)
                else:
                    return (32, 2, 0)
    else:
        if f['programs'] <= 96:
            if f['head_dim'] <= 192:
                if f['max_seqlen_k'] <= 20480:
                    if f['programs'] <= 6:
                        if f['max_seqlen_k'] <= 5120:
                            return (32, 2, 1)
                        else:
                            return (64, 3, 8)
                    else:
                        if f['head_dim'] <= 96:
                            if f['max_seqlen_k'] <= 5120:
                                return 'hand'
                            else:
                                return (128, 3, 2)
                        else:
                            return (64, 2, 2)
                else:
                    if f['programs'] <= 3:
                        if f['head_dim'] <= 96:
                            if f['num_kv_heads'] <= 1:
                                return (128, 2, 4)
                            else:
                                return (128, 2, 2)
                        else:
                            return (128, 2, 2)
                    else:
                        if f['head_dim'] <= 96:
                            if f['kv_bits'] <= 12:
                                return 'hand'
                            else:
                                return (128, 2, 8)
                        else:
                            if f['programs'] <= 24:
                                return (128, 3, 2)
                            else:
                                return (64, 2, 8)
            else:
                if f['num_tokens'] <= 48:
                    if f['programs'] <= 3:
                        return (32, 2, 1)
                    else:
                        if f['max_seqlen_k'] <= 5120:
                            return (32, 2, 2)
                        else:
                            if f['max_seqlen_k'] <= 20480:
                                return (32, 2, 2)
                            else:
                                if f['programs'] <= 24:
                                    return (64, 2, 2)
                                else:
                                    return (64, 2, 8)
                else:
                    return (32, 2, 2)
        else:
            if f['programs'] <= 192:
                if f['head_dim'] <= 96:
                    return (128, 3, 2)
                else:
                    if f['max_seqlen_k'] <= 20480:
                        return (64, 2, 1)
                    else:
                        return (128, 2, 1)
            else:
                if f['num_seqs'] <= 48:
                    return (128, 2, 0)
                else:
                    if f['num_tokens'] <= 192:
                        return (128, 2, 2)
                    else:
                        return (128, 3, 0)


def prefill(f):
    if f['head_dim'] <= 192:
        if f['head_dim'] <= 96:
            if f['kv_bits'] <= 12:
                return (128, 128, 8, 2)
            else:
                return (64, 128, 4, 2)
        else:
            if f['group'] <= 2:
                return (64, 128, 4, 2)
            else:
                return (128, 128, 8, 2)
    else:
        if f['kv_bits'] <= 12:
            return (128, 128, 8, 2)
        else:
            if f['programs'] <= 80:
                return (64, 64, 4, 2)
            else:
                return (128, 64, 8, 2)
