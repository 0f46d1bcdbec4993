#!/usr/bin/env bash
# Tensor-parallel engine (issue 16) on a multi-GPU machine (torch + triton installed, no network), from the repo root:
#   OUT=/some/dir bash bench/gpu_engine_tp.sh [all|tests|cli|bench] [extra bench args...]
# tests: tests/engine/test_tensor_parallel.py and test_context_parallel.py (issue 18) on the GPUs (TEST_ARGS: extra
# pytest arguments, e.g. "-m gpu" for the GPU-only tests; a file that is absent is skipped);
# cli: `tritium generate` on a tiny random-weight Llama (tests/engine/conftest.py) at --tp 1, --tp 2 (comm tritium and
# torch) and --cp 2, each answer printed (bf16 on GPUs: greedy tokens may differ from TP=1 where sums round
# differently), then no process and no /dev/shm segment left behind;
# bench: `python -m tritium.bench engine --tp $TP` (TP default 2): Llama-3-70B random bf16 weights at TP=2 with
# comm tritium then comm torch (batch-1 step, batch-64 throughput, 2048-token prefill), then Llama-3-8B at
# TP=1 and TP=2 (batch-1 step): four engine builds, one at a time; --trace: one traced batch-1 step per engine. JSON $OUT/engine-tp-<gpu>-x<TP>.json
# (rewritten after each engine, "complete": false until the end), logs beside it (git-ignored in bench/results).
# RESUME=FILE: continue the run whose JSON is FILE (cut short by BENCH_TIMEOUT; copied to that path first, e.g.
# RESUME=bench/results/engine-tp-NVIDIA-H200-x2.json once a first call's JSON is committed): only the engines it
# lacks are built.
# Budget on 2x H200: tests <= TEST_TIMEOUT (240 s), bench 7-8 min with a warm Triton cache (six engine builds of
# 45-85 s, 215 s for the first on a cold cache), killed at BENCH_TIMEOUT (400 s): plan two calls, the second
# with RESUME=FILE, FILE the first call's JSON.
set -uo pipefail
what=${1:-all}; shift || true
cd "$(dirname "$0")/.."
source bench/gpu_env.sh
tp=${TP:-2}
stamp() { echo "[$(date +%T)] $*"; }
status=0
stamp "engine-tp on $ngpu x $gpu, TP=$tp, OUT=$OUT"

if [[ $what == tests || $what == all ]]; then
  tests=""
  for f in tests/engine/test_tensor_parallel.py tests/engine/test_context_parallel.py; do
    [[ -f $f ]] && tests+=" $f"
  done
  if [[ -n $tests ]]; then
    log="$OUT/engine-tp-tests-$gpu-x$ngpu.log"
    timeout -k 20 ${TEST_TIMEOUT:-240} python3 -m pytest -q -p no:cacheprovider $tests ${TEST_ARGS:-} > "$log" 2>&1
    rc=$?
    (( rc == 0 || rc == 5 )) || status=1  # 5: no test selected
    stamp "engine-tp tests rc=$rc ($(tail -1 "$log"))"
    (( rc == 0 || rc == 5 )) || grep -E "Error|FAILED|assert" "$log" | head -20
  else
    stamp "engine-tp tests: no test file there yet, skipped"
  fi
fi

if [[ $what == cli || $what == all ]]; then
  log="$OUT/engine-tp-cli-$gpu-x$ngpu.log"
  model=$(mktemp -d)
  python3 -c "import sys; sys.path.insert(0, 'tests/engine'); from conftest import make_tiny_model; \
make_tiny_model(sys.argv[1], 'llama')" "$model" > "$log" 2>&1 || status=1
  for args in "--tp 1" "--tp 2 --comm tritium" "--tp 2 --comm torch" "--cp 2"; do
    start=$(date +%s)
    answer=$(timeout -k 10 180 python3 -m tritium.cli generate --model "$model" $args --max-tokens 16 --raw -q \
             "w1 w2 w3 w4 w5" 2>> "$log")
    rc=$?; (( rc == 0 )) || status=1
    stamp "tritium generate $args: rc=$rc in $(( $(date +%s) - start )) s: $answer"
  done
  sleep 2
  left=$(pgrep -f tritium.engine.worker | wc -l); segs=$(ls /dev/shm | grep -c tritium)
  stamp "after the CLI runs: $left worker processes, $segs tritium /dev/shm segments"
  (( left == 0 && segs == 0 )) || status=1
  rm -rf "$model"
fi

if [[ $what == bench || $what == all ]]; then
  log="$OUT/engine-tp-bench-$gpu-x$tp.log"
  json="$OUT/engine-tp-$gpu-x$tp.json"
  if [[ -n ${RESUME:-} && ! $RESUME -ef $json ]]; then
    cp "$RESUME" "$json" || { stamp "RESUME=$RESUME: cannot copy it to $json"; exit 1; }
  fi
  timeout -k 20 ${BENCH_TIMEOUT:-400} python3 -m tritium.bench engine --tp "$tp" --trace ${RESUME:+--resume} \
    --out "$json" "$@" >> "$log" 2>&1
  rc=$?; (( rc == 0 )) || status=1
  stamp "engine-tp bench rc=$rc"
  grep -E "^\[|FAILED" "$log" | tail -40
  grep -v -e Warning -e "return func" -e "^\[" "$log" | tail -25
fi
exit $status
