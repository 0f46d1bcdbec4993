#!/usr/bin/env bash
# Collectives on a multi-GPU machine (torch + triton installed, no network), from the repo root:
#   OUT=/some/dir bash bench/gpu_collectives.sh [all|tests|bench] [extra bench args...]
# Runs tests/collectives on the visible GPUs (graph replays included) and `python -m tritium.bench
# collectives`; the JSON is collectives-<gpu>-x<N>.json, logs beside it (git-ignored in bench/results).
set -uo pipefail
what=${1:-all}; shift || true
cd "$(dirname "$0")/.."
source "$(dirname "$0")/gpu_env.sh"
status=0
if [[ $what == tests || $what == all ]]; then
  timeout ${TEST_TIMEOUT:-240} python3 -m pytest -q -p no:cacheprovider tests/collectives > "$OUT/collectives-tests-$gpu-x$ngpu.log" 2>&1
  rc=$?; (( rc == 0 )) || status=1
  echo "collectives tests rc=$rc ($(tail -1 "$OUT/collectives-tests-$gpu-x$ngpu.log"))"
fi
if [[ $what == bench || $what == all ]]; then
  timeout ${BENCH_TIMEOUT:-330} python3 -m tritium.bench collectives --world-size "$ngpu" --timeout 320 \
    --out "$OUT/collectives-$gpu-x$ngpu.json" "$@" > "$OUT/collectives-bench-$gpu-x$ngpu.log" 2>&1
  rc=$?; (( rc == 0 )) || status=1
  echo "collectives bench rc=$rc"; tail -25 "$OUT/collectives-bench-$gpu-x$ngpu.log"
fi
exit $status
