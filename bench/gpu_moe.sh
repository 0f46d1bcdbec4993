#!/usr/bin/env bash
# Mixtures of experts on one GPU: the MoE tests (kernels, the block, token parity with transformers, the int4
# tuning test riding along), `python -m tritium.bench moe` (one layer's experts, decode to prefill sizes, against
# cuBLAS batched products, transformers' loop and the copy / matmul ceilings; moe-<gpu>.json) and the engine bench
# on the Qwen3-30B-A3B shape with random bf16 weights (batch-1 step against its weight read; engine-moe-<gpu>.json).
#   OUT=/some/dir bash bench/gpu_moe.sh          (PARTS=tests,bench,engine: any of them, in that order)
# SYSTEMS=tritium,tritium-fp8 adds the fp8 experts to the engine part (stop 72 ran tritium-fp8 alone, 171 s on a
# warm H200: engine-moe-fp8-<gpu>.json).
set -uo pipefail
cd "$(dirname "$0")/.."
PARTS=${PARTS:-tests,bench,engine}
source bench/gpu_one.sh
part tests && { timeout ${TEST_TIMEOUT:-200} python3 -m pytest -q -p no:cacheprovider $workers tests/ops/test_moe.py \
  tests/models/test_moe.py tests/models/test_config.py "tests/engine/test_hf_parity.py" \
  "tests/models/test_linear.py::test_linear_tune_int4" > "$OUT/moe-tests-$GPU.log" 2>&1
echo "moe tests rc=$? ($(tail -1 "$OUT/moe-tests-$GPU.log"))"; }
part bench && { timeout ${BENCH_TIMEOUT:-240} python3 -m tritium.bench moe ${MOE_ARGS:-} \
  --out "$OUT/moe-$GPU.json" > "$OUT/moe-$GPU.log" 2>&1
echo "bench moe rc=$?"; grep -E "checked|^ +T=" "$OUT/moe-$GPU.log" | tail -30; }
part engine && { timeout ${ENGINE_TIMEOUT:-300} python3 -m tritium.bench engine --shape ${SHAPE:-qwen3-30b-a3b} \
  --systems ${SYSTEMS:-tritium} --batch ${BATCH:-64} --out "$OUT/engine-moe-$GPU.json" > "$OUT/engine-moe-$GPU.log" 2>&1
echo "engine bench rc=$?"
grep -E "running|batch-1 step|ratio|weight_read|Error|error" "$OUT/engine-moe-$GPU.log" | tail -12; }
true
