#!/usr/bin/env bash
# Fused GEMM + communication on a multi-GPU machine (torch + triton installed, no network), from the repo root:
#   OUT=/some/dir bash bench/gpu_fused.sh [all|tests|bench] [extra bench args...]
# Runs tests/fused on the visible GPUs (world sizes up to the GPU count) and `python -m tritium.bench
# fused`; the JSON is fused-<gpu>-x<N>.json, logs beside it (git-ignored in bench/results).
set -uo pipefail
what=${1:-all}; shift || true
cd "$(dirname "$0")/.."
source bench/gpu_env.sh
run_suite fused "$what" "$@"
