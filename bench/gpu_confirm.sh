#!/usr/bin/env bash
# Re-time the held-out picks of the committed fit on a GPU machine (torch + triton, no network), repo root:
#   OUT=/some/dir bash bench/gpu_confirm.sh [seconds] [confirm args...]
# Continues bench/results/tuning/attention-<gpu>.confirm.json (copied to $OUT first) and stops cleanly
# before [seconds] (default 540); copy $OUT/attention-<gpu>.confirm.json back to bench/results/tuning/ and
# run again until nothing is left. On a machine of N GPUs: one compile pool, then N shards (one a GPU),
# merged at the end. What is timed and how it is scored: src/tritium/tune/confirm.py.
set -uo pipefail
limit=${1:-540}; shift || true
OUT=${OUT:-bench/results/tuning}
export PYTHONPATH=src PYTHONUNBUFFERED=1
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | awk '{print $1"-"$2}' | tr -cd 'A-Za-z0-9_-')
sweep=bench/results/tuning/attention-$gpu.json
name=attention-$gpu.confirm.json
n=${TUNE_GPUS:-$(nvidia-smi -L | grep -c '^GPU')}
mkdir -p "$OUT"
# Continue the committed confirmation only where it is of this fit (the sweep's and the validation's
# sha256); one of an older fit is left where it is and a new one starts.
if [[ -f bench/results/tuning/$name && $OUT != bench/results/tuning ]]; then
  if python3 -c 'import json, sys; from tritium.tune.confirm import fit_source
sys.exit(json.load(open(sys.argv[2]))["source"] != fit_source(sys.argv[1]))' "$sweep" "bench/results/tuning/$name"; then
    cp "bench/results/tuning/$name" "$OUT/"
  else
    echo "bench/results/tuning/$name is of another fit: starting a new confirmation"
  fi
fi
jobs=$(nproc); (( jobs > 32 )) && jobs=32
start=$SECONDS
timeout -s INT "$limit" python3 -m tritium.tune attention --confirm "$sweep" --out "$OUT" --compile-only --jobs "$jobs" \
  --shard "0/$n" "$@" > "$OUT/confirm-compile-$gpu.log" 2>&1
echo "compile pool: exit $?, $(( SECONDS - start )) s ($(grep -v '^  compile ' "$OUT/confirm-compile-$gpu.log" | tail -1))"
left=$(( limit - (SECONDS - start) )); (( left < 60 )) && left=60
pids=()
for (( i = 0; i < n; i++ )); do
  mkdir -p "$OUT/cshard$i"
  [[ -f $OUT/$name ]] && cp "$OUT/$name" "$OUT/cshard$i/"
  dev=$i; [[ -n ${TUNE_GPUS:-} ]] && dev=${CUDA_VISIBLE_DEVICES:-$i}
  CUDA_VISIBLE_DEVICES=$dev timeout -s INT "$left" python3 -m tritium.tune attention --confirm "$sweep" \
    --out "$OUT/cshard$i" --jobs 1 --shard "$i/$n" "$@" > "$OUT/cshard$i/confirm-$gpu.log" 2>&1 &
  pids+=($!)
done
for (( i = 0; i < n; i++ )); do
  wait "${pids[$i]}"; rc=$?
  echo "shard $i of $n exit: $rc ($(grep -c '^\[' "$OUT/cshard$i/confirm-$gpu.log") workloads re-timed)"
  grep -v '^\[' "$OUT/cshard$i/confirm-$gpu.log" | tail -3
done
python3 -m tritium.tune attention --confirm-merge "$OUT/$name" "$OUT"/cshard*/"$name" && rm -f "$OUT"/cshard*/"$name"
