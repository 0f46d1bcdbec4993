#!/usr/bin/env bash
# stop 36, call 6: the folded-norm chain against the shipped engine (bench/probe_fold_norms.py), after the
# GPU tests of the GEMV residual load and the tuner's fused-variant rule.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/ops/test_gemv.py tests/models/test_linear.py \
  tests/models/test_llama.py > $OUT/tests.log 2>&1
echo "tests rc=$? $(tail -1 $OUT/tests.log)"; grep -E "FAILED|Error" $OUT/tests.log | head -20
timeout 380 python3 bench/probe_fold_norms.py 3 2>&1 | grep -v -i warn | tail -40
