#!/usr/bin/env bash
# stop 36, call 5: the committed JSONs after the merge's parallel loads and fuse_qkv_rope went on:
# bench attention, engine-ablate --trace, bench engine.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | awk '{print $1"-"$2}' | tr -cd 'A-Za-z0-9_-')
timeout 250 python3 -m tritium.bench attention --out "$OUT/attention-$gpu.json" > "$OUT/bench-attention.log" 2>&1
echo "attention rc=$?"; grep -v -i warn "$OUT/bench-attention.log" | tail -28
OUT=$OUT bash bench/gpu_engine.sh ablate 2>&1 | head -14
OUT=$OUT bash bench/gpu_engine.sh bench 2>&1 | tail -22
