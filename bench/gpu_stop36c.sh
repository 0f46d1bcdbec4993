#!/usr/bin/env bash
# stop 36, call 4: L2 prefetch (GEMV evict_last, decode K/V): GPU tests, then bench/probe_prefetch.py.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/ops/test_gemv.py tests/attention/test_paged_attention.py \
  -k "prefetch" > $OUT/tests.log 2>&1
echo "tests rc=$? $(tail -1 $OUT/tests.log)"; grep -E "FAILED|Error" $OUT/tests.log | head -20
timeout 420 python3 bench/probe_prefetch.py 3 2>&1 | grep -v -i warn | tail -30
