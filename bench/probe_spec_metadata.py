"""A/B probe (one process, H100): the attention kernel's speculative metadata loads on and off.

    PYTHONPATH=src python bench/probe_spec_metadata.py OUT.json [rounds]

Decode anchors of `bench attention`, timed cold the same way (a graph over copies of the inputs together
3x the L2), the tree's configuration for both variants, cuDNN dense in the same interleaved rounds.
Each variant's output is checked against SDPA first. Writes {case: {variant: us, ...}} as JSON.
"""

import json
import sys

import torch

from tritium.attention import AttentionWorkspace, launcher, paged_attention
from tritium.bench.attention import (HEAD_DIM, NUM_KV_HEADS, NUM_Q_HEADS, _cold_copies, _paged_batch, _rel_err,
                                     _sdpa, _sdpa_backends)
from tritium.bench.common import header, interleaved_ms

CASES = [(1, 8192), (1, 32768), (16, 4096), (64, 2048), (128, 8192), (256, 1024), (4, 768), (1, 768)]


def main(path: str, rounds: int) -> None:
    result = {"header": header(), "rows": []}
    cudnn = _sdpa_backends()["cudnn"]
    for block_size in (16, 64):
        for batch, seq_len in CASES:
            nbytes = batch * seq_len * NUM_KV_HEADS * HEAD_DIM * 2 * 2
            copies = _cold_copies(nbytes)
            batches = [_paged_batch(batch, seq_len, 1, block_size) for _ in range(copies)]
            group = NUM_Q_HEADS // NUM_KV_HEADS
            out = torch.empty_like(batches[0][0]["q"])
            workspace = AttentionWorkspace(batch, NUM_Q_HEADS, HEAD_DIM, device=out.device)
            hints = dict(max_seqlen_q=1, max_seqlen_k=seq_len)
            dense = [(b[0]["q"].view(batch, NUM_KV_HEADS, group, HEAD_DIM), b[1], b[2]) for b in batches]

            def call(spec, inputs):
                launcher.SPECULATIVE_METADATA = spec
                try:
                    return paged_attention(**inputs, **hints, out=out, workspace=workspace)
                finally:
                    launcher.SPECULATIVE_METADATA = True

            ref = _sdpa(_sdpa_backends()["flash"], *dense[0], False).reshape_as(out)
            row = dict(batch=batch, seq_len=seq_len, block_size=block_size, copies=copies)
            for spec in (True, False):
                row[f"rel_err_{spec}"] = _rel_err(call(spec, batches[0][0]), ref)
                assert row[f"rel_err_{spec}"] < 2e-2, row
            fns = {
                "spec": lambda: [call(True, batches[c][0]) for c in range(copies)],
                "plain": lambda: [call(False, batches[c][0]) for c in range(copies)],
                "cudnn": lambda: [_sdpa(cudnn, *dense[c], False) for c in range(copies)],
            }
            ms, errors = interleaved_ms(fns, graph=True, rounds=rounds)
            for name, t in ms.items():
                row[f"{name}_us"] = round(t / copies * 1e3, 3)
                row[f"{name}_tbs"] = round(nbytes / (t / copies) / 1e9, 4)
            row["spec_vs_plain"] = round(ms["plain"] / ms["spec"], 4)
            if "cudnn" in ms:
                row["spec_vs_cudnn"] = round(ms["cudnn"] / ms["spec"], 4)
                row["plain_vs_cudnn"] = round(ms["cudnn"] / ms["plain"], 4)
            row["errors"] = errors
            print(json.dumps(row), flush=True)
            result["rows"].append(row)
            del batches, dense
            torch.cuda.empty_cache()
            with open(path, "w") as f:
                json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5)
