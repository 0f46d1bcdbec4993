#!/usr/bin/env bash
# tritium's GEMM on a GPU machine (torch + triton installed, no network), from the repo root:
#   OUT=/some/dir bash bench/gpu_gemm.sh [all|tests|bench] [extra bench args, e.g. --sweep]
# Tests first (tests/fused compiled: bf16 shapes, CUDA graph, no allocation with out=), then
# `python -m tritium.bench gemm`, which checks every shape against the fp32 product before timing it.
# Writes $OUT/gemm-<gpu>.json (<gpu>: NVIDIA-H100, NVIDIA-H200, from nvidia-smi) and logs (git-ignored
# in bench/results). On an H100: tests ~1 min, bench ~2 min (+2 min with --sweep).
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}; shift || true
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
export PYTHONPATH=src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
# "NVIDIA H100 80GB HBM3" -> NVIDIA-H100: the first two words of the name (bench/results naming).
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | awk '{print $1"-"$2}' | tr -cd 'A-Za-z0-9_-')
gpu=${gpu:-gpu}
rc=0
if [[ $what == tests || $what == all ]]; then
  timeout 240 python3 -m pytest -q -p no:cacheprovider tests/fused 2>&1 | tee "$OUT/tests-gemm.log"
  rc=${PIPESTATUS[0]}
  echo "gemm tests rc=$rc"
fi
if [[ $what == bench || $what == all ]]; then
  timeout 420 python3 -m tritium.bench gemm --out "$OUT/gemm-$gpu.json" "$@" 2>&1 | tee "$OUT/bench-gemm.log"
  brc=${PIPESTATUS[0]}
  echo "gemm bench rc=$brc"
  [[ $brc -ne 0 ]] && rc=$brc
fi
exit $rc
