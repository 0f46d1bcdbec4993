#!/usr/bin/env bash
# Collectives on a multi-GPU machine (torch + triton installed, no network), from the repo root:
#   OUT=/some/dir bash bench/gpu_collectives.sh [all|tests|bench] [extra bench args...]
# Runs tests/collectives on the visible GPUs (world sizes up to the GPU count) and `python -m tritium.bench
# collectives`; the JSON is collectives-<gpu>-x<N>.json, logs beside it (git-ignored in bench/results).
set -uo pipefail
what=${1:-all}; shift || true
cd "$(dirname "$0")/.."
source bench/gpu_env.sh
run_suite collectives "$what" "$@"
