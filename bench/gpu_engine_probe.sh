#!/usr/bin/env bash
# One H100 call: the engine benchmark (all three systems) then the engine GPU tests and the attention
# tests that touch the kernels the decode chain launches with PDL. Results under $OUT.
export PYTHONPATH=src
timeout 300 python3 -m tritium.bench engine --out $OUT/engine-H100.json > $OUT/bench.log 2>&1; echo bench rc=$?
grep -v Warning $OUT/bench.log | tail -30
timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests/engine tests/attention/test_kv_cache.py tests/attention/test_paged_attention.py -k "not test_paged_attention or splits or decode_regimes" > $OUT/tests.log 2>&1; echo tests rc=$?; tail -4 $OUT/tests.log
