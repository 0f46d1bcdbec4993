#!/usr/bin/env bash
# Speculative decoding by prompt lookup on one GPU: its engine tests (tokens equal plain greedy decoding's) and
# `python -m tritium.bench speculative` (Llama-3-8B shape, random bf16 weights: a verification step of 1 + d
# query tokens against plain decode windows, drafts all wrong / all right / looked up; speculative-<gpu>.json).
#   OUT=/some/dir bash bench/gpu_speculative.sh          (PARTS=tests,bench: either, in that order)
# Extra bench options in SPEC_ARGS (e.g. "--batches 1,4,16 --drafts 1,2,3,4,5,7").
set -uo pipefail
cd "$(dirname "$0")/.."
PARTS=${PARTS:-tests,bench}
source bench/gpu_one.sh
part tests && { timeout ${TEST_TIMEOUT:-200} python3 -m pytest -q -p no:cacheprovider $workers \
  tests/engine/test_speculative.py ${SPEC_TESTS:-tests/engine/test_decode_windows.py} > "$OUT/speculative-tests-$GPU.log" 2>&1
echo "speculative tests rc=$? ($(tail -1 "$OUT/speculative-tests-$GPU.log"))"; }
part bench && { timeout ${BENCH_TIMEOUT:-420} python3 -m tritium.bench speculative ${SPEC_ARGS:-} \
  --out "$OUT/speculative-$GPU.json" > "$OUT/speculative-$GPU.log" 2>&1
echo "bench speculative rc=$?"; grep -vE "^  linear|^\s*$" "$OUT/speculative-$GPU.log" | tail -45; }
true
