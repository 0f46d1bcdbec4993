#!/usr/bin/env bash
# Every multi-rank test suite on the visible GPUs (world sizes up to the GPU count), one after another, from the
# repo root:   OUT=/some/dir bash bench/gpu_multi_tests.sh [SUITE...]
# SUITE: shmem collectives fused distributed_decode engine (default: all five). Each runs under its own bound
# (TEST_TIMEOUT, default 150 s; TEST_K: a pytest -k expression), and logs to $OUT/multi-tests-SUITE-<gpu>-x<N>.log
# one line per test as it ends (-v), with every thread's stack dumped into the log when one test runs longer than
# HANG_DUMP seconds (default 90), so that a bound reached still says where it waited; with pytest-timeout there,
# a test past PER_TEST (default 200 s) fails by itself and the suite goes on.
# Afterwards: no tritium worker process and no tritium /dev/shm segment may be left. Exit status 1 if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_env.sh
declare -A files=(
  [shmem]="tests/shmem"
  [collectives]="tests/collectives"
  [fused]="tests/fused/test_fused_ops.py"
  [distributed_decode]="tests/fused/test_distributed_decode.py"
  [engine]="tests/engine/test_tensor_parallel.py tests/engine/test_context_parallel.py"
)
suites=("$@"); (( ${#suites[@]} )) || suites=(shmem collectives fused distributed_decode engine)
per_test=""
python3 -c "import pytest_timeout" 2>/dev/null && per_test="--timeout=${PER_TEST:-200} --timeout-method=signal"
status=0
for s in "${suites[@]}"; do
  [[ -n ${files[$s]:-} ]] || { echo "unknown suite $s (one of ${!files[*]})"; exit 2; }
  log="$OUT/multi-tests-$s-$gpu-x$ngpu.log"
  start=$(date +%s)
  TRITIUM_REPORT_AT_ONCE=1 timeout -k 20 "${TEST_TIMEOUT:-150}" python3 -m pytest -v -rfE -p no:cacheprovider -o faulthandler_timeout="${HANG_DUMP:-90}" \
    $per_test ${TEST_K:+-k "$TEST_K"} ${files[$s]} > "$log" 2>&1
  rc=$?; (( rc == 0 )) || status=1
  echo "[$(date +%T)] $s: rc=$rc in $(( $(date +%s) - start )) s: $(tail -1 "$log")"
  (( rc == 0 )) || grep -E "PASSED|FAILED|ERROR|Error|assert|Timeout" "$log" | head -40
done
sleep 2
left=$(pgrep -f "tritium.engine.worker|tritium.shmem" | wc -l); segs=$(ls /dev/shm | grep -c tritium)
echo "left behind: $left processes, $segs tritium /dev/shm segments"
(( left == 0 && segs == 0 )) || status=1
exit $status
