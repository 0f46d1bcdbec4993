#!/usr/bin/env bash
# Speculative decoding with a draft model on one GPU: its engine tests (tokens equal plain greedy decoding's, the
# draft windows as CUDA graphs) and `python -m tritium.bench draft` (Llama-3-8B shape drafted by a Llama-3.2-1B
# shape, random bf16 weights: the draft window's and the verification's cost against plain decode windows;
# draft-<gpu>.json).
#   OUT=/some/dir bash bench/gpu_draft.sh          (PARTS=tests,bench: either, in that order)
# Extra bench options in DRAFT_ARGS (e.g. "--batches 1,4,16 --drafts 2,4,6").
set -uo pipefail
cd "$(dirname "$0")/.."
PARTS=${PARTS:-tests,bench}
source bench/gpu_one.sh
part tests && { timeout ${TEST_TIMEOUT:-200} python3 -m pytest -q -p no:cacheprovider $workers \
  tests/engine/test_draft.py ${DRAFT_TESTS:-tests/engine/test_speculative.py} > "$OUT/draft-tests-$GPU.log" 2>&1
echo "draft tests rc=$? ($(tail -1 "$OUT/draft-tests-$GPU.log"))"; }
part bench && { timeout ${BENCH_TIMEOUT:-420} python3 -m tritium.bench draft ${DRAFT_ARGS:-} \
  --out "$OUT/draft-$GPU.json" > "$OUT/draft-$GPU.log" 2>&1
echo "bench draft rc=$?"; grep -vE "^  linear|^\s*$" "$OUT/draft-$GPU.log" | tail -40; }
true
