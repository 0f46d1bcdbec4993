#!/usr/bin/env bash
# Embeddings, fill in the middle and predicted outputs on one GPU: their engine and server tests (pooled vectors
# against transformers', prompts of each FIM format, predictions that leave the answer as plain greedy decoding's)
# and `python -m tritium.bench embed` (Qwen3-Embedding-0.6B shape, random bf16 weights: LLM.embed against
# transformers' forward pass and the cuBLAS matmul ceiling; embed-<gpu>.json).
#   OUT=/some/dir bash bench/gpu_embed.sh          (PARTS=bench,tests: either; the bench runs first, on a GPU no test
# worker holds)
# Extra bench options in EMBED_ARGS (e.g. "--shape qwen3-8b --cases 64x512").
set -uo pipefail
cd "$(dirname "$0")/.."
PARTS=${PARTS:-tests,bench}
source bench/gpu_one.sh
part bench && { timeout ${BENCH_TIMEOUT:-300} python3 -m tritium.bench embed ${EMBED_ARGS:-} \
  --out "$OUT/embed-$GPU.json" > "$OUT/embed-$GPU.log" 2>&1
echo "bench embed rc=$?"; grep -vE "^\s*$|Warning" "$OUT/embed-$GPU.log" | tail -20; }
part tests && { timeout ${TEST_TIMEOUT:-240} python3 -m pytest -q -p no:cacheprovider $workers \
  tests/engine/test_pooling.py tests/engine/test_fim.py tests/engine/test_speculative.py \
  > "$OUT/embed-tests-$GPU.log" 2>&1
echo "embed tests rc=$? ($(tail -1 "$OUT/embed-tests-$GPU.log"))"; grep -E "^FAILED|Error" "$OUT/embed-tests-$GPU.log" | head; }
true
