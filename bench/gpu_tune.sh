#!/usr/bin/env bash
# Attention tuning sweep on a GPU machine (torch + triton installed, no network), from the repo root:
#   OUT=/some/dir bash bench/gpu_tune.sh [seconds] [tune args...]
# Continues the sweep in bench/results/tuning/attention-<gpu>.json (copied to $OUT first), stops
# cleanly before [seconds] (default 540) and leaves the JSON under $OUT: copy it back to
# bench/results/tuning/ and run again until it reports nothing to sweep. Fitting happens on the CPU
# machine: python -m tritium.tune attention --fit bench/results/tuning/attention-<gpu>.json
set -uo pipefail
limit=${1:-540}; shift || true
OUT=${OUT:-bench/results/tuning}
export PYTHONPATH=src PYTHONUNBUFFERED=1
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | awk '{print $1"-"$2}' | tr -cd 'A-Za-z0-9_-')
if [[ -f bench/results/tuning/attention-$gpu.json && $OUT != bench/results/tuning ]]; then
  cp bench/results/tuning/attention-$gpu.json "$OUT/"
fi
# SIGINT at the limit: the sweep writes its JSON after every workload, so nothing finished is lost.
timeout -s INT "$limit" python3 -m tritium.tune attention --out "$OUT" --no-fit "$@" 2>&1 | tee "$OUT/tune-$gpu.log"
echo "tune exit: ${PIPESTATUS[0]}"
