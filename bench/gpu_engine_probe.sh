export PYTHONPATH=src
timeout 300 python3 -m tritium.bench engine --systems tritium,sdpa --prefetch-sweep --profile-host --out $OUT/engine-pdl-H100.json > $OUT/bench.log 2>&1; echo bench rc=$?
grep -v Warning $OUT/bench.log | tail -90
timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/engine tests/attention/test_kv_cache.py tests/attention/test_paged_attention.py -k "not test_paged_attention or splits or decode_regimes" > $OUT/tests.log 2>&1; echo tests rc=$?; tail -4 $OUT/tests.log
