#!/usr/bin/env bash
# stop 36, call 1: GPU tests of the code changed since the last GPU test run, then the merge-loads probe.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 300 python3 -m pytest -q -p no:cacheprovider -x tests/ops/test_qkv_rope.py tests/ops/test_gemv.py \
  tests/models/test_llama.py tests/models/test_linear.py tests/attention/test_paged_attention.py \
  -k "not test_paged_attention.py or merge or splits" > $OUT/tests.log 2>&1
echo "tests rc=$? $(tail -1 $OUT/tests.log)"; grep -E "FAILED|Error" $OUT/tests.log | head -20
timeout 240 python3 bench/probe_merge_loads.py 3 2>&1 | grep -v Warn | tail -12
