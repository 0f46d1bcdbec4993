#!/usr/bin/env bash
# Every multi-rank test suite on the visible GPUs (world sizes up to the GPU count), one after another, from the
# repo root:   OUT=/some/dir bash bench/gpu_multi_tests.sh [SUITE...]
# SUITE: shmem collectives fused distributed_decode engine (default: all five). Each runs under its own bound
# (TEST_TIMEOUT, default 150 s), stops at its first failure (-x), and logs to $OUT/multi-tests-SUITE-<gpu>-x<N>.log.
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
status=0
for s in "${suites[@]}"; do
  [[ -n ${files[$s]:-} ]] || { echo "unknown suite $s (one of ${!files[*]})"; exit 2; }
  log="$OUT/multi-tests-$s-$gpu-x$ngpu.log"
  start=$(date +%s)
  timeout -k 20 "${TEST_TIMEOUT:-150}" python3 -m pytest -x -q -p no:cacheprovider ${files[$s]} > "$log" 2>&1
  rc=$?; (( rc == 0 )) || status=1
  echo "[$(date +%T)] $s: rc=$rc in $(( $(date +%s) - start )) s: $(tail -1 "$log")"
  (( rc == 0 )) || grep -E "Error|FAILED|assert|Timeout" "$log" | head -15
done
sleep 2
left=$(pgrep -f "tritium.engine.worker|tritium.shmem" | wc -l); segs=$(ls /dev/shm | grep -c tritium)
echo "left behind: $left processes, $segs tritium /dev/shm segments"
(( left == 0 && segs == 0 )) || status=1
exit $status
