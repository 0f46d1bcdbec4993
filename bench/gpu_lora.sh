#!/usr/bin/env bash
# LoRA adapters on one GPU: their tests (the kernels against the reference; the engine's tokens against transformers
# with each adapter merged; the server) and `python -m tritium.bench lora` (Llama-3-8B shape, random bf16 weights:
# the update against its projection, decode steps and prefill with and without adapters; lora-<gpu>.json).
#   OUT=/some/dir bash bench/gpu_lora.sh          (PARTS=tests,bench: either, in that order)
# Extra bench options in LORA_ARGS (e.g. "--batches 1,16,64 --rank 64").
set -uo pipefail
cd "$(dirname "$0")/.."
PARTS=${PARTS:-tests,bench}
source bench/gpu_one.sh
part tests && { timeout ${TEST_TIMEOUT:-240} python3 -m pytest -q -p no:cacheprovider $workers \
  tests/ops/test_lora.py tests/engine/test_lora.py tests/server/test_lora.py > "$OUT/lora-tests-$GPU.log" 2>&1
echo "lora tests rc=$? ($(tail -1 "$OUT/lora-tests-$GPU.log"))"; }
part bench && { timeout ${BENCH_TIMEOUT:-420} python3 -m tritium.bench lora ${LORA_ARGS:-} \
  --out "$OUT/lora-$GPU.json" > "$OUT/lora-$GPU.log" 2>&1
echo "bench lora rc=$?"; grep -vE "^  linear|^\s*$" "$OUT/lora-$GPU.log" | tail -60; }
true
