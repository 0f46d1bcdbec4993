#!/usr/bin/env bash
# stop 36, call 3: GEMV L2 prefetch: GPU tests, then engine-ablate with its variants.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/ops/test_gemv.py tests/models/test_llama.py \
  -k "prefetch or qkv_rope" > $OUT/tests.log 2>&1
echo "tests rc=$? $(tail -1 $OUT/tests.log)"; grep -E "FAILED|Error" $OUT/tests.log | head -20
OUT=$OUT bash bench/gpu_engine.sh ablate 2>&1 | tail -40
