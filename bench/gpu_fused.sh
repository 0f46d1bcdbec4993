#!/usr/bin/env bash
# Fused GEMM + communication on a multi-GPU machine (torch + triton installed, no network), from the repo root:
#   OUT=/some/dir bash bench/gpu_fused.sh [all|tests|bench] [extra bench args...]
# Runs tests/fused on the visible GPUs (world sizes up to the GPU count) and `python -m tritium.bench
# fused`; the JSON is fused-<gpu>-x<N>.json, logs beside it (git-ignored in bench/results).
set -uo pipefail
what=${1:-all}; shift || true
cd "$(dirname "$0")/.."
source "$(dirname "$0")/gpu_env.sh"
status=0
if [[ $what == tests || $what == all ]]; then
  timeout ${TEST_TIMEOUT:-240} python3 -m pytest -q -p no:cacheprovider tests/fused > "$OUT/fused-tests-$gpu-x$ngpu.log" 2>&1
  rc=$?; (( rc == 0 )) || status=1
  echo "fused tests rc=$rc ($(tail -1 "$OUT/fused-tests-$gpu-x$ngpu.log"))"
  (( rc == 0 )) || grep -E "Error|error|FAILED|assert" "$OUT/fused-tests-$gpu-x$ngpu.log" | head -20
fi
if [[ $what == bench || $what == all ]]; then
  timeout ${BENCH_TIMEOUT:-330} python3 -m tritium.bench fused --world-size "$ngpu" --timeout 320 \
    --out "$OUT/fused-$gpu-x$ngpu.json" "$@" > "$OUT/fused-bench-$gpu-x$ngpu.log" 2>&1
  rc=$?; (( rc == 0 )) || status=1
  echo "fused bench rc=$rc"; grep -v Warning "$OUT/fused-bench-$gpu-x$ngpu.log" | grep -v "return func" | tail -30
fi
exit $status
