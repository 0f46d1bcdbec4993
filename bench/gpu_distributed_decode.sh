#!/usr/bin/env bash
# Distributed flash decode on a multi-GPU machine (torch + triton installed, no network), from the repo root:
#   OUT=/some/dir bash bench/gpu_distributed_decode.sh [all|tests|bench] [extra bench args...]
# Runs tests/fused/test_distributed_decode.py on the visible GPUs (world sizes up to the GPU count) and
# `python -m tritium.bench distributed_decode` (correctness pass first); the JSON is
# distributed_decode-<gpu>-x<N>.json, logs beside it (git-ignored in bench/results).
set -uo pipefail
what=${1:-all}; shift || true
cd "$(dirname "$0")/.."
source bench/gpu_env.sh
status=0
if [[ $what == tests || $what == all ]]; then
  log="$OUT/distributed_decode-tests-$gpu-x$ngpu.log"
  timeout ${TEST_TIMEOUT:-300} python3 -m pytest -q -p no:cacheprovider tests/fused/test_distributed_decode.py > "$log" 2>&1
  rc=$?; (( rc == 0 )) || status=1
  echo "distributed_decode tests rc=$rc ($(tail -1 "$log"))"
  (( rc == 0 )) || grep -E "Error|FAILED|assert" "$log" | head -20
fi
if [[ $what == bench || $what == all ]]; then
  # caches of up to 64 GiB per GPU are filled per case: more time than run_suite's default
  BENCH_TIMEOUT=${BENCH_TIMEOUT:-600} run_suite distributed_decode bench --timeout 590 "$@" || status=1
fi
exit $status
