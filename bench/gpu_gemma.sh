#!/usr/bin/env bash
# Gemma on one GPU: the Gemma tests (config, GeGLU kernel, token and log-probability parity with transformers on
# both backends, windows on some layers) and the engine bench on the Gemma 3 12B shape with random bf16 weights
# (batch-1 step against its weight read, the SDPA engine and transformers; engine-gemma-3-12b-<gpu>.json).
# PARTS=window: the window pool's tests and `python -m tritium.bench engine-window` (Gemma 3 12B's shape, long
# prompts on one KV budget with and without the pool; engine-window-gemma-3-12b-<gpu>.json).
#   OUT=/some/dir bash bench/gpu_gemma.sh          (PARTS=tests,engine,window: any, in that order)
set -uo pipefail
cd "$(dirname "$0")/.."
PARTS=${PARTS:-tests,engine}
source bench/gpu_one.sh
part tests && { timeout ${TEST_TIMEOUT:-200} python3 -m pytest -q -p no:cacheprovider $workers \
  tests/models/test_config.py "tests/ops/test_ops.py" "tests/engine/test_hf_parity.py" \
  > "$OUT/gemma-tests-$GPU.log" 2>&1
echo "gemma tests rc=$? ($(tail -1 "$OUT/gemma-tests-$GPU.log"))"; }
part engine && { timeout ${ENGINE_TIMEOUT:-420} python3 -m tritium.bench engine --shape ${SHAPE:-gemma-3-12b} \
  --systems ${SYSTEMS:-tritium,sdpa,transformers} --batch ${BATCH:-64} ${ENGINE_ARGS:-} \
  --out "$OUT/engine-${SHAPE:-gemma-3-12b}-$GPU.json" > "$OUT/engine-gemma-$GPU.log" 2>&1
echo "engine bench rc=$?"
grep -E "running|batch-1 step|speedup|weight|Error|error|^ +(tritium|sdpa|transformers)" "$OUT/engine-gemma-$GPU.log" | tail -20; }
part window && { timeout ${TEST_TIMEOUT:-200} python3 -m pytest -q -p no:cacheprovider $workers \
  tests/engine/test_window_pool.py tests/engine/test_gpu.py -k "window" > "$OUT/window-tests-$GPU.log" 2>&1
echo "window tests rc=$? ($(tail -1 "$OUT/window-tests-$GPU.log"))"
timeout ${WINDOW_TIMEOUT:-400} python3 -m tritium.bench engine-window ${WINDOW_ARGS:-} \
  --out "$OUT/engine-window-gemma-3-12b-$GPU.json" > "$OUT/engine-window-$GPU.log" 2>&1
echo "engine-window bench rc=$?"
grep -E "running|pages|tok/s|step|Error|error|pool" "$OUT/engine-window-$GPU.log" | tail -24; }
true
