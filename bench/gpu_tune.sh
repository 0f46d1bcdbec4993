#!/usr/bin/env bash
# Attention tuning sweep on a GPU machine (torch + triton installed, no network), from the repo root:
#   OUT=/some/dir bash bench/gpu_tune.sh [seconds] [tune args...]
# Continues the sweep in bench/results/tuning/attention-<gpu>.json (copied to $OUT first), stops
# cleanly before [seconds] (default 540) and leaves the JSON under $OUT: copy it back to
# bench/results/tuning/ and run again until it reports nothing to sweep. On a machine of N GPUs, N
# processes sweep (one a GPU, `--shard i/N`, after one compile pool for all of them) and their records
# are merged into $OUT/attention-<gpu>.json at the end (their logs stay in $OUT/shard<i>/).
# Fitting happens on the CPU machine: python -m tritium.tune attention --fit bench/results/tuning/attention-<gpu>.json
set -uo pipefail
limit=${1:-540}; shift || true
OUT=${OUT:-bench/results/tuning}
export PYTHONPATH=src PYTHONUNBUFFERED=1
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | awk '{print $1"-"$2}' | tr -cd 'A-Za-z0-9_-')
# TUNE_GPUS=1 with CUDA_VISIBLE_DEVICES=i: sweep on GPU i alone while the others do something else.
n=${TUNE_GPUS:-$(nvidia-smi -L | grep -c '^GPU')}
mkdir -p "$OUT"
if [[ -f bench/results/tuning/attention-$gpu.json && $OUT != bench/results/tuning ]]; then
  cp bench/results/tuning/attention-$gpu.json "$OUT/"
fi
# Workloads swept but kept apart from the committed sweep (attention-<gpu>.<what>-extra.json, same settings) join
# the continued one, so that they are not timed again; the trees are then refitted on the whole.
for extra in bench/results/tuning/attention-"$gpu".*-extra.json; do
  [[ -f $extra && -f $OUT/attention-$gpu.json ]] || continue
  python3 -m tritium.tune attention --merge "$OUT/attention-$gpu.json" "$extra" || exit 1
done
if (( n <= 1 )); then
  # SIGINT at the limit: the sweep writes its JSON after every workload, so nothing finished is lost.
  timeout -s INT "$limit" python3 -m tritium.tune attention --out "$OUT" --no-fit "$@" 2>&1 | tee "$OUT/tune-$gpu.log"
  echo "tune exit: ${PIPESTATUS[0]}"
  exit 0
fi
# One compile pool for every shard's workloads (the shards share most kernels and Triton's on-disk cache),
# then the shards time with the time that is left. Measured (stop 37, 4 H100s, cold cache): four pools of
# 16 took 199-221 s each for the same kernels.
jobs=$(nproc); (( jobs > 32 )) && jobs=32
start=$SECONDS
timeout -s INT "$limit" python3 -m tritium.tune attention --out "$OUT" --no-fit --compile-only --jobs "$jobs" \
  --shard "0/$n" "$@" > "$OUT/compile-$gpu.log" 2>&1
echo "compile pool: exit $?, $(( SECONDS - start )) s ($(grep -v '^  compile ' "$OUT/compile-$gpu.log" | tail -1))"
left=$(( limit - (SECONDS - start) )); (( left < 60 )) && left=60
pids=()
for (( i = 0; i < n; i++ )); do
  mkdir -p "$OUT/shard$i"
  [[ -f $OUT/attention-$gpu.json ]] && cp "$OUT/attention-$gpu.json" "$OUT/shard$i/"
  CUDA_VISIBLE_DEVICES=$i timeout -s INT "$left" python3 -m tritium.tune attention --out "$OUT/shard$i" --no-fit \
    --jobs 1 --shard "$i/$n" "$@" > "$OUT/shard$i/tune-$gpu.log" 2>&1 &
  pids+=($!)
done
for (( i = 0; i < n; i++ )); do
  wait "${pids[$i]}"; rc=$?
  echo "shard $i of $n exit: $rc ($(grep -c '^\[' "$OUT/shard$i/tune-$gpu.log") workloads swept)"
  grep -v '^\[\|compiled' "$OUT/shard$i/tune-$gpu.log" | tail -5
done
shards=("$OUT"/shard*/attention-"$gpu".json)
[[ -f $OUT/attention-$gpu.json ]] || cp "${shards[0]}" "$OUT/attention-$gpu.json"
python3 -m tritium.tune attention --merge "$OUT/attention-$gpu.json" "${shards[@]}" && rm -f "${shards[@]}"
